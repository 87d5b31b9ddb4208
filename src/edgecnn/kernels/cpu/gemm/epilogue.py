"""Fused epilogues: bias and activation applied in place after a GEMM, so a convolution's or
dense layer's output is touched once more at most (seed 004: fuse conv + bias + ReLU)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TypeAlias

import numba
import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.cpu.fastmath import sigmoid
from edgecnn.ops.fused import FusedActivation

F32: TypeAlias = float | np.float32
"""A float parameter of compiled code: callers pass Python floats and float32 scalars alike (numba
compiles a variant per argument type; annotations do not reach it). numpy's stubs do not make
np.float32 a float, so the annotation names both."""


class ActivationKind(enum.IntEnum):
    """Activations a compiled epilogue can apply, by their name in ``edgecnn.ops.fused.ACTIVATIONS``
    (upper-cased); the int is what compiled code branches on. Fused steps with any other activation
    are declined by the CPU kernels (``implements_activation``) and run on the reference kernel."""

    NONE = 0
    RELU = 1
    LEAKY_RELU = 2  # alpha
    CLIP = 3  # low, high (ReLU6 = CLIP 0..6)
    SIGMOID = 4
    HARD_SWISH = 5
    SILU = 6  # x * sigmoid(x)
    HARD_SIGMOID = 7  # clip(scale * x + offset, 0, 1): scale in alpha's slot, offset in low's


def implements_activation(node: Node) -> bool:
    """Whether the compiled epilogue applies the node's fused activation (always, for an op without
    one): every CPU kernel's rule checks it (``kernels.cpu.selection.register``)."""
    return (
        not isinstance(node.attrs, FusedActivation)
        or node.attrs.activation.upper() in ActivationKind.__members__
    )


def activation_args(attrs: object) -> tuple[int, float, float, float]:
    """(kind, alpha, low, high) for compiled code: a FusedActivation's fields, or no activation.
    The three slots carry each kind's parameters (see ``ActivationKind``)."""
    if not isinstance(attrs, FusedActivation):
        return int(ActivationKind.NONE), 0.0, 0.0, 0.0
    kind = ActivationKind[attrs.activation.upper()]
    if kind == ActivationKind.HARD_SIGMOID:
        return int(kind), float(attrs.scale), float(attrs.offset), 0.0
    return int(kind), float(attrs.negative_slope), float(attrs.low), float(attrs.high)


ZERO, HALF, ONE, SIX = np.float32(0.0), np.float32(0.5), np.float32(1.0), np.float32(6.0)
NEGATIVE_ZERO = np.float32(-0.0)
"""The offset that changes nothing: x + -0.0 is x for every x, -0.0 included (LLVM drops the add)."""


@numba.njit(inline="always", cache=True)
def _relu(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    return ZERO if v <= ZERO else v  # NaN stays NaN, as with np.maximum


@numba.njit(inline="always", cache=True)
def _leaky_relu(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    return v if v >= ZERO else v * alpha


@numba.njit(inline="always", cache=True)
def _clip(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    return v if v != v else min(max(v, low), high)


@numba.njit(inline="always", cache=True)
def _sigmoid(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    return sigmoid(v)


@numba.njit(inline="always", cache=True)
def _hard_swish(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    return v * min(max(v / SIX + HALF, ZERO), ONE)


@numba.njit(inline="always", cache=True)
def _silu(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    return v * sigmoid(v)


@numba.njit(inline="always", cache=True)
def _hard_sigmoid(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    t = v * alpha + low  # scale, offset
    return t if t != t else min(max(t, ZERO), ONE)


@numba.njit(inline="always", cache=True)
def activate(v: F32, kind: int, alpha: float, low: float, high: float) -> np.float32:
    """One value through activation ``kind``, computed in float32 like the reference. A loop that
    calls this for each element branches on ``kind`` each time and stays scalar; a span in
    memory goes through ``activate_in_place`` instead."""
    x, a, lo, hi = np.float32(v), np.float32(alpha), np.float32(low), np.float32(high)
    if kind == 1:
        return _relu(x, a, lo, hi)
    if kind == 2:
        return _leaky_relu(x, a, lo, hi)
    if kind == 3:
        return _clip(x, a, lo, hi)
    if kind == 4:
        return _sigmoid(x, a, lo, hi)
    if kind == 5:
        return _hard_swish(x, a, lo, hi)
    if kind == 6:
        return _silu(x, a, lo, hi)
    if kind == 7:
        return _hard_sigmoid(x, a, lo, hi)
    return x


@numba.njit(inline="always", cache=True, fastmath={"contract"})
def _map_in_place(
    f: Callable[..., np.float32],
    buf: np.ndarray,
    at: np.uint64,
    count: np.uint64,
    offset: np.float32,
    alpha: np.float32,
    low: np.float32,
    high: np.float32,
) -> None:
    """buf[at + i] = f(buf[at + i] + offset) in place: with two arrays, LLVM checks for overlap at
    run time and an in-place call would always take its scalar fallback."""
    for i in range(count):
        buf[at + i] = f(buf[at + i] + offset, alpha, low, high)


@numba.njit(inline="always", cache=True)
def activate_in_place(
    buf: np.ndarray,
    at: np.uint64,
    count: np.uint64,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    offset: F32 = NEGATIVE_ZERO,
) -> None:
    """buf[at + i] = act(buf[at + i] + offset) for i < count (a bias in the same pass; no
    activation: nothing to do, the offset included). Each kind has a loop of its own, so no
    per-element branch on the kind is left for LLVM to hoist, and every kind's loop vectorises
    (the exponential of Sigmoid and SiLU included: ``fastmath``). A separate loop for the bias
    would be vectorised 64 floats per iteration, all scalar remainder on a 7x7 map's rows."""
    a, lo, hi, b = np.float32(alpha), np.float32(low), np.float32(high), np.float32(offset)
    if kind == 1:
        _map_in_place(_relu, buf, at, count, b, a, lo, hi)
    elif kind == 2:
        _map_in_place(_leaky_relu, buf, at, count, b, a, lo, hi)
    elif kind == 3:
        _map_in_place(_clip, buf, at, count, b, a, lo, hi)
    elif kind == 4:
        _map_in_place(_sigmoid, buf, at, count, b, a, lo, hi)
    elif kind == 5:
        _map_in_place(_hard_swish, buf, at, count, b, a, lo, hi)
    elif kind == 6:
        _map_in_place(_silu, buf, at, count, b, a, lo, hi)
    elif kind == 7:
        _map_in_place(_hard_sigmoid, buf, at, count, b, a, lo, hi)


@numba.njit(parallel=True, nogil=True, cache=True)
def add_activation_(
    values: np.ndarray,  # (n,), written in place
    addend: np.ndarray,  # (n,)
    has_addend: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
) -> None:
    """values[i] = act(values[i] + addend[i]) in place (a dense layer's bias, broadcast beforehand)."""
    n = values.shape[0]
    chunk = 4096
    for start in numba.prange((n + chunk - 1) // chunk):
        lo = start * chunk
        hi = min(lo + chunk, n)
        if has_addend:
            for i in range(lo, hi):
                values[i] = values[i] + addend[i]
        activate_in_place(values, np.uint64(lo), np.uint64(hi - lo), kind, alpha, low, high)


@numba.njit(inline="always", cache=True)
def _residual_span(
    values: np.ndarray,
    residual: np.ndarray,
    lo: int,
    hi: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
) -> None:
    """values[lo:hi] = act(values + residual) over one span: ReLU in the same pass as the sum, the
    other kinds in a second pass over the span (``activate_in_place``)."""
    if kind == 1:
        for i in range(lo, hi):
            values[i] = _relu(values[i] + residual[i], ZERO, ZERO, ZERO)
    else:
        for i in range(lo, hi):
            values[i] = values[i] + residual[i]
        activate_in_place(values, np.uint64(lo), np.uint64(hi - lo), kind, alpha, low, high)


@numba.njit(parallel=True, nogil=True, cache=True)
def residual_activation_(
    values: np.ndarray,  # (n,) float32, a conv output, written in place
    residual: np.ndarray,  # (n,) float32, the shortcut branch
    kind: int,
    alpha: float,
    low: float,
    high: float,
    chunk: int,
) -> None:
    """values = act(values + residual) in place, chunk by chunk in parallel (a residual block's tail)."""
    n = values.shape[0]
    for c in numba.prange((n + chunk - 1) // chunk):
        lo = c * chunk
        _residual_span(values, residual, lo, min(lo + chunk, n), kind, alpha, low, high)


@numba.njit(nogil=True, cache=True)
def residual_activation_serial_(
    values: np.ndarray, residual: np.ndarray, kind: int, alpha: float, low: float, high: float, chunk: int
) -> None:
    """``residual_activation_`` without a parallel region, for tensors below the thread grain."""
    _residual_span(values, residual, 0, values.shape[0], kind, alpha, low, high)
