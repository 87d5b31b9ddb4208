"""Fused epilogues: bias and activation applied in place after a GEMM, so a convolution's or
dense layer's output is touched once more at most (seed 004: fuse conv + bias + ReLU)."""

from __future__ import annotations

import enum

import numba
import numpy as np

from edgecnn.ops.fused import ACTIVATIONS, FusedActivation


class ActivationKind(enum.IntEnum):
    """Activations a compiled epilogue can apply; the int is what compiled code branches on."""

    NONE = 0
    RELU = 1
    LEAKY_RELU = 2  # alpha
    CLIP = 3  # low, high (ReLU6 = CLIP 0..6)
    SIGMOID = 4
    HARD_SWISH = 5
    SILU = 6  # x * sigmoid(x)


assert tuple(k.name.lower() for k in ActivationKind) == ACTIVATIONS  # codes follow ops.fused's order


def activation_args(attrs: object) -> tuple[int, float, float, float]:
    """(kind, alpha, low, high) for compiled code: a FusedActivation's fields, or no activation."""
    if not isinstance(attrs, FusedActivation):
        return int(ActivationKind.NONE), 0.0, 0.0, 0.0
    kind = ActivationKind[attrs.activation.upper()]
    return int(kind), float(attrs.negative_slope), float(attrs.low), float(attrs.high)


@numba.njit(inline="always", cache=True)
def activate(v: float, kind: int, alpha: float, low: float, high: float) -> float:
    if kind == 1:
        return v if v > 0.0 else 0.0
    if kind == 2:
        return v if v >= 0.0 else v * alpha
    if kind == 3:
        return min(max(v, low), high)
    if kind == 4:
        if v >= 0.0:
            return 1.0 / (1.0 + np.exp(-v))
        e = np.exp(v)
        return e / (1.0 + e)
    if kind == 5:
        return v * min(max(v + 3.0, 0.0), 6.0) / 6.0
    if kind == 6:
        if v >= 0.0:
            return v / (1.0 + np.exp(-v))
        e = np.exp(v)
        return v * e / (1.0 + e)
    return v


@numba.njit(parallel=True, cache=True)
def bias_activation_(
    block: np.ndarray,  # (rows, pixels): one output channel per row
    bias: np.ndarray,  # (rows,)
    has_bias: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
) -> None:
    """block[r, p] = act(block[r, p] + bias[r]) in place; parallel over rows."""
    rows, pixels = block.shape
    for r in numba.prange(rows):
        b = bias[r] if has_bias else np.float32(0.0)
        row = block[r]
        if kind == 0:
            for p in range(pixels):
                row[p] = row[p] + b
        elif kind == 1:
            for p in range(pixels):
                row[p] = max(row[p] + b, np.float32(0.0))
        else:
            for p in range(pixels):
                row[p] = activate(row[p] + b, kind, alpha, low, high)


@numba.njit(parallel=True, cache=True)
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
