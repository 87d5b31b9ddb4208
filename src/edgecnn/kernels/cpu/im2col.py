"""im2col for 2-D convolution: unfold one image's receptive fields into a (C*KH*KW, OH*OW)
matrix so the convolution becomes one GEMM per group (the classic Caffe formulation of seed 000).

Each row of the matrix is one (channel, tap) pair; the columns that read padding are found once
per row (``valid_range``), so the copy loops carry no per-element bounds test.

Numba's on-disk cache keys a compiled function on its own file only: after editing this file,
delete the cache of the kernels that call ``im2col_range`` (conv_gemm, sparse_compiled).
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
def shifted_rows(
    image: np.ndarray,  # (Cg, H, W)
    kernel_h: int,
    kernel_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    row0: int,
    row1: int,
    p0: int,
    p1: int,
    dest: np.ndarray,  # (row1 - row0, >= p1 - p0)
) -> None:
    """im2col_rows for unit strides and an output as wide as the input (SAME-like padding): each
    row of the matrix is then the channel's plane shifted by one constant offset, so it is one long
    copy, with zeros written afterwards where a tap falls in the padding (the rows above or below the
    image, and |shift| columns at one edge of every output row). Replaces out_h short copies per
    row; tiny-YOLO's and SqueezeNet's 3x3 layers with few channels spend most of their time here."""
    channels, height, width = image.shape
    taps = kernel_h * kernel_w
    plane = height * width
    zero = np.float32(0.0)
    flat = image.reshape(channels * plane)
    for row in range(row0, row1):
        c = row // taps
        dy = (row % taps) // kernel_w * dilation_h - pad_top
        dx = row % kernel_w * dilation_w - pad_left
        out = dest[row - row0]
        # outputs whose tap row lies in the image, clipped to p0..p1, then to the plane's floats
        lo = min(max(max(-dy, 0) * width, p0), p1)
        hi = max(min((height - dy) * width, p1), lo)
        shift = dy * width + dx
        lo_copy = min(max(lo, -shift), hi)
        hi_copy = max(min(hi, plane - shift), lo_copy)
        for i in range(p0, lo_copy):
            out[np.uint64(i - p0)] = zero
        source = c * plane + shift
        for i in range(lo_copy, hi_copy):
            out[np.uint64(i - p0)] = flat[np.uint64(source + i)]
        for i in range(hi_copy, p1):
            out[np.uint64(i - p0)] = zero
        if dx == 0:
            continue
        # the edge columns whose tap column is outside the image: x + dx < 0 or >= width
        x0, x1 = (0, min(-dx, width)) if dx < 0 else (max(width - dx, 0), width)
        for oy in range(p0 // width, (p1 - 1) // width + 1):
            start = max(oy * width + x0, p0)
            stop = min(oy * width + x1, p1)
            for i in range(start, stop):
                out[np.uint64(i - p0)] = zero


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
    """Every row of the matrix, columns p0..p1 (im2col_rows over all Cg*KH*KW rows)."""
    rows = image.shape[0] * kernel_h * kernel_w
    im2col_rows(
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
        0,
        rows,
        p0,
        p1,
        dest,
    )


@numba.njit(cache=True)
def im2col_rows(
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
    row0: int,
    row1: int,
    p0: int,
    p1: int,
    dest: np.ndarray,  # (row1 - row0, >= p1 - p0): rows row0..row1, columns p0..p1 of the matrix
) -> None:
    """Rows row0..row1 (one per (channel, tap)), columns p0..p1 of the im2col matrix.

    Indices are cast to unsigned once they are known to be inside the arrays (every range below
    starts where its index is >= 0): numba then drops its negative-index wraparound and the copies
    vectorise, with no slice made per segment. Narrow rows (LeNet's, SimpleCNN's) ran 2-3x slower
    with a view per segment."""
    channels, height, width = image.shape
    if stride_h == 1 and stride_w == 1 and out_w == width:
        shifted_rows(
            image, kernel_h, kernel_w, pad_top, pad_left, dilation_h, dilation_w, row0, row1, p0, p1, dest
        )
        return
    taps = kernel_h * kernel_w
    first_row, last_row = p0 // out_w, (p1 - 1) // out_w
    zero = np.float32(0.0)
    flat = image.reshape(channels * height * width)
    for row in range(row0, row1):
        c = row // taps
        ki = (row % taps) // kernel_w
        kj = row % kernel_w
        out = dest[row - row0]
        x_offset = kj * dilation_w - pad_left
        x_lo, x_hi = valid_range(x_offset, stride_w, width, out_w)
        for oy in range(first_row, last_row + 1):
            base = oy * out_w - p0  # where output column 0 of row oy sits in ``out`` (may be < 0)
            begin = max(-base, 0)  # so base + i >= 0 for every i below
            end = min(p1 - p0 - base, out_w)
            iy = oy * stride_h - pad_top + ki * dilation_h
            lo = min(max(x_lo, begin), end)  # i >= x_lo: the input column is >= 0
            hi = max(min(x_hi, end), lo)
            if iy < 0 or iy >= height or hi == lo:
                for i in range(begin, end):
                    out[np.uint64(base + i)] = zero
                continue
            for i in range(begin, lo):
                out[np.uint64(base + i)] = zero
            source = (c * height + iy) * width + x_offset
            if stride_w == 1:
                for i in range(lo, hi):
                    out[np.uint64(base + i)] = flat[np.uint64(source + i)]
            else:
                for i in range(lo, hi):
                    out[np.uint64(base + i)] = flat[np.uint64(source + i * stride_w)]
            for i in range(hi, end):
                out[np.uint64(base + i)] = zero


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
