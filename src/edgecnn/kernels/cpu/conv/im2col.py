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

from edgecnn.limits import MemoryBudget


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


@numba.njit(inline="always", cache=True)
def _copy_segment(
    out: np.ndarray, base: int, flat: np.ndarray, source: int, stride_w: int, lo: int, hi: int
) -> None:
    """out[base + i] = flat[source + i * stride_w] for i in [lo, hi), both indices known to be >= 0.
    Unit and 2 strides get loops of their own, whose constant stride LLVM can vectorise."""
    if stride_w == 1:
        for i in range(lo, hi):
            out[np.uint64(base + i)] = flat[np.uint64(source + i)]
    elif stride_w == 2:
        for i in range(lo, hi):
            out[np.uint64(base + i)] = flat[np.uint64(source + 2 * i)]
    else:
        for i in range(lo, hi):
            out[np.uint64(base + i)] = flat[np.uint64(source + i * stride_w)]


@numba.njit(inline="always", cache=True)
def _fill(out: np.ndarray, begin: int, end: int, value: np.float32) -> None:
    for i in range(begin, end):
        out[np.uint64(i)] = value


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
    vectorise, with no slice made per segment (a view per segment costs most on narrow rows). The
    output rows that [p0, p1) covers whole (all but at most the first and the last) take a shorter
    loop: their valid input rows and columns are found once per matrix row, not per segment, which
    matters on strided layers, whose segments are short."""
    channels, height, width = image.shape
    if stride_h == 1 and stride_w == 1 and out_w == width:
        shifted_rows(
            image, kernel_h, kernel_w, pad_top, pad_left, dilation_h, dilation_w, row0, row1, p0, p1, dest
        )
        return
    taps = kernel_h * kernel_w
    first_row, last_row = p0 // out_w, (p1 - 1) // out_w
    whole0 = (p0 + out_w - 1) // out_w  # output rows [whole0, whole1) lie entirely in [p0, p1)
    whole1 = max(p1 // out_w, whole0)
    zero = np.float32(0.0)
    flat = image.reshape(channels * height * width)
    for row in range(row0, row1):
        c = row // taps
        ki = (row % taps) // kernel_w
        kj = row % kernel_w
        out = dest[row - row0]
        x_offset = kj * dilation_w - pad_left
        x_lo, x_hi = valid_range(x_offset, stride_w, width, out_w)
        y_offset = ki * dilation_h - pad_top
        for part in range(2):  # the partial first and last output rows
            begin_row, end_row = (
                (first_row, min(whole0, last_row + 1)) if part == 0 else (whole1, last_row + 1)
            )
            for oy in range(begin_row, end_row):
                base = oy * out_w - p0  # where output column 0 of row oy sits in ``out`` (may be < 0)
                begin = max(-base, 0)  # so base + i >= 0 for every i below
                end = min(p1 - p0 - base, out_w)
                iy = oy * stride_h + y_offset
                lo = min(max(x_lo, begin), end)  # i >= x_lo: the input column is >= 0
                hi = max(min(x_hi, end), lo)
                if iy < 0 or iy >= height or hi == lo:
                    _fill(out, base + begin, base + end, zero)
                    continue
                _fill(out, base + begin, base + lo, zero)
                _copy_segment(out, base, flat, (c * height + iy) * width + x_offset, stride_w, lo, hi)
                _fill(out, base + hi, base + end, zero)
        if whole1 == whole0:
            continue
        # the whole rows: those whose input row is inside the image, zeros above and below them
        y_lo, y_hi = valid_range(y_offset, stride_h, height, whole1)
        y_lo = min(max(y_lo, whole0), whole1)
        y_hi = max(min(y_hi, whole1), y_lo)
        _fill(out, whole0 * out_w - p0, y_lo * out_w - p0, zero)
        for oy in range(y_lo, y_hi):
            base = oy * out_w - p0
            _fill(out, base, base + x_lo, zero)
            _copy_segment(
                out,
                base,
                flat,
                (c * height + oy * stride_h + y_offset) * width + x_offset,
                stride_w,
                x_lo,
                x_hi,
            )
            _fill(out, base + x_hi, base + out_w, zero)
        _fill(out, y_hi * out_w - p0, whole1 * out_w - p0, zero)


GATHER_MAX_WIDTH = 16
"""Output rows at most this wide are unfolded through a tap table (``tap_table``, ``gather_rows``)
rather than segment by segment: a segment is then one output row, and finding its valid columns
costs more than copying it; on wider rows the segments win."""


def gathers_columns(width: int, strides: tuple[int, int], out: tuple[int, int]) -> bool:
    """Whether a layer's im2col goes through a tap table: narrow output rows, except where each
    matrix row is one shifted copy of the plane (``shifted_rows``: unit strides, output as wide as
    the input)."""
    return out[1] <= GATHER_MAX_WIDTH and not (strides == (1, 1) and out[1] == width)


NO_TAP_TABLE = np.empty((0, 0), dtype=np.int32)
"""What a layer unfolded segment by segment passes for its tap table."""


TAP_TABLE_SHARE = 16
"""A tap table may take at most this fraction (1/16) of the memory budget; a larger one is not
built and the layer unfolds segment by segment instead (the same matrix, without the index), so a
layer with a huge, narrow output cannot spend the budget on its index."""


def tap_table(
    height: int,
    width: int,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, int],
    dilations: tuple[int, int],
    out: tuple[int, int],
) -> np.ndarray:
    """(KH*KW, OH*OW) int32: for filter tap t = ky*KW + kx and output pixel p, the offset within a
    channel plane of the input value that im2col copies to row (c, t), column p; -1 where the tap
    falls in the padding. The same for every channel, so it is small (9 x 64 for a 3x3 layer with
    an 8x8 output); NO_TAP_TABLE where it would pass its share of the memory budget
    (TAP_TABLE_SHARE). Built one tap at a time, so nothing larger than the table is allocated."""
    taps, pixels = kernel[0] * kernel[1], out[0] * out[1]
    if taps * pixels * 4 > MemoryBudget.default().limit // TAP_TABLE_SHARE:
        return NO_TAP_TABLE
    oy = np.arange(out[0], dtype=np.int64)[:, None] * strides[0] - pads[0]  # (OH, 1): tap ky=0's row
    ox = np.arange(out[1], dtype=np.int64)[None, :] * strides[1] - pads[1]  # (1, OW)
    table = np.empty((taps, out[0], out[1]), dtype=np.int32)
    for t in range(taps):
        iy = oy + t // kernel[1] * dilations[0]
        ix = ox + t % kernel[1] * dilations[1]
        inside = (iy >= 0) & (iy < height) & (ix >= 0) & (ix < width)
        np.copyto(table[t], np.where(inside, iy * width + ix, -1), casting="unsafe")
    return table.reshape(taps, pixels)


@numba.njit(cache=True)
def gather_rows(
    image: np.ndarray,  # (Cg, H, W): one group's channels of one image
    taps: np.ndarray,  # (KH*KW, OH*OW) from tap_table
    row0: int,
    row1: int,
    p0: int,
    p1: int,
    dest: np.ndarray,  # (row1 - row0, >= p1 - p0): rows row0..row1, columns p0..p1 of the matrix
) -> None:
    """Rows row0..row1 (one per (channel, tap)), columns p0..p1 of the im2col matrix, each value
    fetched through the tap table: one flat loop per matrix row, with no per-segment bounds
    arithmetic."""
    plane = image.shape[1] * image.shape[2]
    flat = image.reshape(image.shape[0] * plane)
    count = taps.shape[0]
    zero = np.float32(0.0)
    for row in range(row0, row1):
        base = (row // count) * plane
        out = dest[row - row0]
        offsets = taps[row % count]
        for i in range(p1 - p0):
            at = offsets[p0 + i]
            out[i] = flat[np.uint64(base + at)] if at >= 0 else zero


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
