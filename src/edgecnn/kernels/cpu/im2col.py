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


@numba.njit(cache=True)
def im2col_range(
    image: np.ndarray,  # (Cg, H, W): one group's channels of one image
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    out_w: int,
    p0: int,
    p1: int,
    dest: np.ndarray,  # (Cg*KH*KW, >= p1 - p0): columns p0..p1 of the im2col matrix
) -> None:
    """Copies run over views from index 0 (no negative-index checks, so they vectorise)."""
    channels, height, width = image.shape
    taps = kernel_h * kernel_w
    first_row, last_row = p0 // out_w, (p1 - 1) // out_w
    for row in range(channels * taps):
        c = row // taps
        ki = (row % taps) // kernel_w
        kj = row % kernel_w
        out = dest[row]
        x_offset = kj * dilation_w - pad_left
        x_lo, x_hi = valid_range(x_offset, stride_w, width, out_w)
        for oy in range(first_row, last_row + 1):
            base = oy * out_w
            begin = max(p0 - base, 0)
            end = min(p1 - base, out_w)
            segment = out[base + begin - p0 : base + end - p0]  # output columns begin..end of row oy
            iy = oy * stride_h - pad_top + ki * dilation_h
            lo = min(max(x_lo, begin), end)
            hi = max(min(x_hi, end), lo)
            if iy < 0 or iy >= height or hi == lo:
                for i in range(end - begin):
                    segment[i] = 0.0
                continue
            for i in range(lo - begin):
                segment[i] = 0.0
            inside = segment[lo - begin : hi - begin]
            start = lo * stride_w + x_offset
            if stride_w == 1:
                values = image[c, iy, start : start + hi - lo]
                for i in range(hi - lo):
                    inside[i] = values[i]
            else:
                strided = image[c, iy, start : start + (hi - lo - 1) * stride_w + 1 : stride_w]
                for i in range(hi - lo):
                    inside[i] = strided[i]
            tail = segment[hi - begin :]
            for i in range(end - hi):
                tail[i] = 0.0


@numba.njit(parallel=True, nogil=True, cache=True)
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
    blocks: int,
) -> None:
    """The whole matrix, its columns cut into ``blocks`` ranges filled side by side."""
    pixels = out_h * out_w
    blocks = max(1, min(blocks, pixels))
    step = (pixels + blocks - 1) // blocks
    for block in numba.prange(blocks):
        p0 = block * step
        p1 = min(p0 + step, pixels)
        if p1 > p0:
            im2col_range(
                image,
                kernel_h,
                kernel_w,
                stride_h,
                stride_w,
                pad_top,
                pad_left,
                dilation_h,
                dilation_w,
                out_w,
                p0,
                p1,
                columns[:, p0:p1],
            )
