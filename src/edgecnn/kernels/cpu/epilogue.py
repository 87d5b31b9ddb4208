"""Fused epilogues: bias and activation applied in place to a (channels, pixels) block, so a
convolution's output is touched once after its GEMM (seed 004: fuse conv + bias + ReLU)."""

from __future__ import annotations

import enum

import numba
import numpy as np


class ActivationKind(enum.IntEnum):
    """Activations a compiled epilogue can apply; the int is what compiled code branches on."""

    NONE = 0
    RELU = 1
    LEAKY_RELU = 2  # alpha
    CLIP = 3  # low, high (ReLU6 = CLIP 0..6)
    SIGMOID = 4
    HARD_SWISH = 5
    SILU = 6  # x * sigmoid(x)


@numba.njit(inline="always", cache=True)
def activate(v: float, kind: int, alpha: float, low: float, high: float) -> float:
    if kind == 1:
        return v if v > 0.0 else 0.0
    if kind == 2:
        return v if v >= 0.0 else v * alpha
    if kind == 3:
        return min(max(v, low), high)
    if kind == 4:
        return 1.0 / (1.0 + np.exp(-v))
    if kind == 5:
        return v * min(max(v + 3.0, 0.0), 6.0) / 6.0
    if kind == 6:
        return v / (1.0 + np.exp(-v))
    return v


@numba.njit(parallel=True, cache=True)
def bias_activation_(
    block: np.ndarray, bias: np.ndarray, has_bias: bool, kind: int, alpha: float, low: float, high: float
) -> None:
    """block[c, p] = act(block[c, p] + bias[c]) in place; parallel over channels."""
    channels, pixels = block.shape
    for c in numba.prange(channels):
        b = bias[c] if has_bias else 0.0
        row = block[c]
        for p in range(pixels):
            row[p] = activate(row[p] + b, kind, alpha, low, high)
