"""im2col for 2-D convolution: unfold one image's receptive fields into a (C*KH*KW, OH*OW)
matrix so the convolution becomes one GEMM per group (the classic Caffe formulation of seed 000).

Each row of the matrix is one (channel, tap) pair; the columns that read padding are found once
per row (``valid_range``), so the copy loops carry no per-element bounds test.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(inline="always", cache=True)
def valid_range(offset: int, stride: int, size: int, count: int) -> tuple[int, int]:
    """The outputs o in [lo, hi) whose input index o * stride + offset lies in [0, size)."""
    lo = 0 if offset >= 0 else (-offset + stride - 1) // stride
    last = size - 1 - offset
    hi = 0 if last < 0 else min(count, last // stride + 1)
    lo = min(lo, count)
    return lo, max(lo, hi)


@numba.njit(parallel=True, cache=True)
def im2col_2d(
    image: np.ndarray,  # (C, H, W)
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    out_h: int,
    out_w: int,
    columns: np.ndarray,  # (C*KH*KW, OH*OW), written
) -> None:
    channels, height, width = image.shape
    taps = kernel_h * kernel_w
    for row in numba.prange(channels * taps):
        c = row // taps
        ki = (row % taps) // kernel_w
        kj = row % kernel_w
        dest = columns[row]
        x_offset = kj * dilation_w - pad_left
        x_lo, x_hi = valid_range(x_offset, stride_w, width, out_w)
        for oy in range(out_h):
            iy = oy * stride_h - pad_top + ki * dilation_h
            base = oy * out_w
            if iy < 0 or iy >= height:
                for ox in range(out_w):
                    dest[base + ox] = 0.0
                continue
            src = image[c, iy]
            for ox in range(x_lo):
                dest[base + ox] = 0.0
            if stride_w == 1:
                for ox in range(x_lo, x_hi):
                    dest[base + ox] = src[ox + x_offset]
            else:
                for ox in range(x_lo, x_hi):
                    dest[base + ox] = src[ox * stride_w + x_offset]
            for ox in range(x_hi, out_w):
                dest[base + ox] = 0.0
