"""Fused epilogues: bias and activation applied in place after a GEMM, so a convolution's or
dense layer's output is touched once more at most (seed 004: fuse conv + bias + ReLU)."""

from __future__ import annotations

import enum
from typing import TypeAlias

import numba
import numpy as np

from edgecnn.ir.graph import Node
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


@numba.njit(inline="always", cache=True)
def activate(v: F32, kind: int, alpha: float, low: float, high: float) -> np.float32:
    """One value through activation ``kind``, computed in float32 like the reference."""
    x = np.float32(v)
    zero, one = np.float32(0.0), np.float32(1.0)
    if kind == 1:
        return zero if x <= zero else x  # NaN stays NaN, as with np.maximum
    if kind == 2:
        return x if x >= zero else x * np.float32(alpha)
    if kind == 3:
        return x if x != x else min(max(x, np.float32(low)), np.float32(high))
    if kind == 4 or kind == 6:
        e = np.exp(-abs(x))  # never overflows
        r = one / (one + e)
        s = r if x >= zero else e * r
        return s if kind == 4 else x * s
    if kind == 5:
        return x * min(max(x / np.float32(6.0) + np.float32(0.5), zero), one)
    if kind == 7:
        t = x * np.float32(alpha) + np.float32(low)  # scale, offset
        return t if t != t else min(max(t, zero), one)
    return x


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
        for i in range(lo, hi):
            v = values[i] + addend[i] if has_addend else values[i]
            values[i] = activate(v, kind, alpha, low, high)


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
    """values[lo:hi] = act(values + residual) over one span; no activation and ReLU get loops of their
    own, without the per-element dispatch of ``activate`` that the other kinds go through."""
    if kind == 0:
        for i in range(lo, hi):
            values[i] = values[i] + residual[i]
    elif kind == 1:
        zero = np.float32(0.0)
        for i in range(lo, hi):
            v = values[i] + residual[i]
            values[i] = zero if v <= zero else v  # NaN stays NaN, as with np.maximum
    else:
        for i in range(lo, hi):
            values[i] = activate(values[i] + residual[i], kind, alpha, low, high)


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
