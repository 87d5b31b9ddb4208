"""im2col for 2-D convolution: unfold one image's receptive fields into a (C*KH*KW, OH*OW)
matrix so the convolution becomes one GEMM per group (the classic Caffe formulation of seed 000)."""

from __future__ import annotations

import numba
import numpy as np


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
        for oy in range(out_h):
            iy = oy * stride_h - pad_top + ki * dilation_h
            base = oy * out_w
            if iy < 0 or iy >= height:
                for ox in range(out_w):
                    dest[base + ox] = 0.0
                continue
            src = image[c, iy]
            for ox in range(out_w):
                ix = ox * stride_w - pad_left + kj * dilation_w
                dest[base + ox] = src[ix] if 0 <= ix < width else 0.0
