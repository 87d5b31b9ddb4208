"""Compiled 2-D max and average pooling (and the global forms), parallel over (image, channel) planes.

A window's reduction is separable: each output row first reduces its window's input rows column by
column (``_vertical``: contiguous, vectorised rows; at stride 1 every row whose window lies inside
the plane at once, as one flat loop), into a per-worker scratch of OH rows per plane; then each
output reduces its window's columns of that scratch (``_horizontal``), in one flat loop: scratch
rows are stride_w times as long as the pooled rows (padded with the neutral value where the input
width is not a multiple of the stride, e.g. SqueezeNet's 27 -> 13; such pooled rows are longer than
OW and cut when written out). The few border columns, whose windows leave the row, are then
recomputed from their valid taps only (``_border_columns``). So there is no padded copy of the
input and no bounds test in a vectorised loop. Small planes go through these loops in chunks (SCRATCH_FLOATS of row reductions),
so 7x7 or 14x14 planes cost a few loops per chunk instead of several per plane or per row. 2x2
windows at stride 2 inside the plane (VGG, YOLO, LeNet) are one fused pass per output row. 3x3
windows at stride 2 on planes at least PHASED_MIN_WIDTH wide (SqueezeNet, GoogLeNet, ResNet) are
two passes per output row: the window's rows reduced into the padded row's even and odd columns,
then three contiguous loads per output (_pool_3x3_s2_rows), no scratch and no border columns.

Offsets are unsigned integers into flat arrays and no array views are made inside the loops: a
view or a call per row costs as much as reducing a 28-wide row, and signed offsets would keep LLVM
from vectorising (negative-index wraparound).

Max propagates NaN (``_max``); the average divides each sum by the taps counted for its output
(inside the input, or inside the padded input with count_include_pad; never ceil_mode's extra
positions). An elementwise activation (a fused pool + activation step) is applied to each finished
chunk while it is in cache.

Over 400 lines on purpose: one compiled kernel (``_pool_2d``) and the inline helpers it is built
from, which share its scratch layout and border conventions; split, each half would be unreadable
without the other.
"""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.conv.im2col import valid_range
from edgecnn.kernels.cpu.gemm.epilogue import activate
from edgecnn.kernels.cpu.pool.plane_sum import plane_sum
from edgecnn.kernels.cpu.system.threads import worker_share
from edgecnn.kernels.cpu.system.twins import parallel_and_serial

PHASED_MIN_WIDTH = 40
"""Narrowest input that 3x3 windows at stride 2 pool row by row through even and odd columns
(_pool_3x3_s2_rows); narrower planes cost more per row than per column there, and take the
separable loops, which run over chunks of planes."""

SCRATCH_FLOATS = 16384
"""Scratch per worker (64 KiB): small planes are processed this many floats of row reductions at
a time, so that each loop below runs once per chunk of planes instead of once per plane."""


@numba.njit(cache=True)
def _tap_ranges(
    out_size: int, stride: int, pad_begin: int, pad_end: int, dilation: int, size: int, taps: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per output index: first and end tap inside the input, and the taps inside the padded input."""
    lo = np.empty(out_size, dtype=np.int64)
    hi = np.empty(out_size, dtype=np.int64)
    padded = np.empty(out_size, dtype=np.int64)
    for o in range(out_size):
        start = o * stride - pad_begin
        lo[o], hi[o] = valid_range(start, dilation, size, taps)
        p_lo, p_hi = valid_range(start + pad_begin, dilation, size + pad_begin + pad_end, taps)
        padded[o] = p_hi - p_lo
    return lo, hi, padded


@numba.njit(cache=True)
def _interior(lo: np.ndarray, hi: np.ndarray, taps: int) -> tuple[int, int]:
    """The run [first, last) of outputs whose every tap lies inside the input (empty: first == last)."""
    n = lo.shape[0]
    first = 0
    while first < n and not (lo[first] == 0 and hi[first] == taps):
        first += 1
    last = first
    while last < n and lo[last] == 0 and hi[last] == taps:
        last += 1
    return first, last


@numba.njit(inline="always", cache=True)
def _max(a: np.float32, b: np.float32) -> np.float32:
    """The larger value; NaN if either is (a NaN ``b`` wins every comparison by losing it)."""
    return a if (a > b) | (a != a) else b


@numba.njit(cache=True)
def _reduce_rows(
    src: np.ndarray,
    first: int,
    step: int,
    taps: int,
    is_max: bool,
    line: np.ndarray,
    start: int,
    count: int,
    rows: int,
    src_pitch: int,
    line_pitch: int,
) -> None:
    """line[start + r * line_pitch + i] = max (or sum) over t < taps of src[first + r * src_pitch +
    t * step + i], for i < count and r < rows; no taps: the neutral value. Offsets are unsigned and
    no views are made, and the row loop sits inside each case: all three keep short rows cheap (a
    view, or a call per row, costs as much as a 28-wide row)."""
    n, s = np.uint64(count), np.uint64(step)
    sp, lp = np.uint64(src_pitch), np.uint64(line_pitch)
    for r in range(np.uint64(rows)):
        o = np.uint64(start) + r * lp
        u1 = np.uint64(first) + r * sp
        if taps == 0:
            neutral = np.float32(-np.inf) if is_max else np.float32(0.0)
            for i in range(n):
                line[o + i] = neutral
        elif taps == 1:
            for i in range(n):
                line[o + i] = src[u1 + i]
        elif taps == 2:
            u2 = u1 + s
            if is_max:
                for i in range(n):
                    line[o + i] = _max(src[u1 + i], src[u2 + i])
            else:
                for i in range(n):
                    line[o + i] = src[u1 + i] + src[u2 + i]
        else:
            u2 = u1 + s
            u3 = u2 + s
            if is_max:
                for i in range(n):
                    line[o + i] = _max(_max(src[u1 + i], src[u2 + i]), src[u3 + i])
            else:
                for i in range(n):
                    line[o + i] = (src[u1 + i] + src[u2 + i]) + src[u3 + i]
            for t in range(3, taps):
                ut = u1 + np.uint64(t) * s
                if is_max:
                    for i in range(n):
                        line[o + i] = _max(line[o + i], src[ut + i])
                else:
                    for i in range(n):
                        line[o + i] += src[ut + i]


@numba.njit(cache=True)
def _vertical(
    src: np.ndarray,  # flat input
    first_plane: int,  # offset of the chunk's first plane in src
    planes: int,  # planes in the chunk (consecutive)
    plane_in: int,  # H * W
    width: int,
    pitch: int,  # scratch row length (>= W)
    stride_h: int,
    pad_top: int,
    dilation_h: int,
    kernel_h: int,
    y_lo: np.ndarray,
    y_hi: np.ndarray,
    row_first: int,
    row_last: int,
    is_max: bool,
    scratch: np.ndarray,  # (>= planes * OH * pitch,): row oy of plane p gets its rows' reduction
) -> None:
    """Every output row's window rows reduced column by column: the rows whose window lies inside
    the plane in one call per plane (at stride 1 with pitch == W they follow each other in both
    arrays: one flat loop per plane, one call for the chunk), each border row in one call for the
    whole chunk. Scratch columns past W are not written."""
    out_h = y_lo.shape[0]
    step = dilation_h * width
    plane_scratch = out_h * pitch
    if row_last > row_first:
        first = first_plane + (row_first * stride_h - pad_top) * width
        start = row_first * pitch
        rows = row_last - row_first
        if stride_h == 1 and pitch == width:
            _reduce_rows(
                src,
                first,
                step,
                kernel_h,
                is_max,
                scratch,
                start,
                rows * width,
                planes,
                plane_in,
                plane_scratch,
            )
        else:
            for p in range(planes):
                _reduce_rows(
                    src, first + p * plane_in, step, kernel_h, is_max, scratch, start + p * plane_scratch, width,
                    rows, stride_h * width, pitch,
                )  # fmt: skip
    for oy in range(out_h):
        if row_first <= oy < row_last:
            continue
        taps = y_hi[oy] - y_lo[oy]
        first = first_plane + (oy * stride_h - pad_top + y_lo[oy] * dilation_h) * width if taps > 0 else 0
        _reduce_rows(
            src, first, step, taps, is_max, scratch, oy * pitch, width, planes, plane_in, plane_scratch
        )


@numba.njit(cache=True)
def _reduce_columns(
    s: np.ndarray,
    first: int,
    kernel: int,
    stride: int,
    dilation: int,
    is_max: bool,
    out: np.ndarray,
    start: int,
    count: int,
    rows: int,
    s_pitch: int,
    out_pitch: int,
) -> None:
    """out[start + r * out_pitch + i] = max (or sum) of s[first + r * s_pitch + i * stride + j *
    dilation] over j < kernel, for i < count and r < rows. 3- and 2-wide windows at stride 1 or 2
    (GoogLeNet, ResNet, YOLO) are one pass each."""
    n, d = np.uint64(count), np.uint64(dilation)
    sp, op = np.uint64(s_pitch), np.uint64(out_pitch)
    for r in range(np.uint64(rows)):
        o = np.uint64(start) + r * op
        b = np.uint64(first) + r * sp
        if kernel == 3 and stride == 1:
            b2, b3 = b + d, b + d + d
            if is_max:
                for i in range(n):
                    out[o + i] = _max(_max(s[b + i], s[b2 + i]), s[b3 + i])
            else:
                for i in range(n):
                    out[o + i] = (s[b + i] + s[b2 + i]) + s[b3 + i]
        elif kernel == 3 and stride == 2 and dilation == 1:
            b2, b3 = b + np.uint64(1), b + np.uint64(2)
            if is_max:
                for i in range(n):
                    out[o + i] = _max(_max(s[b + i + i], s[b2 + i + i]), s[b3 + i + i])
            else:
                for i in range(n):
                    out[o + i] = (s[b + i + i] + s[b2 + i + i]) + s[b3 + i + i]
        elif kernel == 2 and stride == 1:
            b2 = b + d
            if is_max:
                for i in range(n):
                    out[o + i] = _max(s[b + i], s[b2 + i])
            else:
                for i in range(n):
                    out[o + i] = s[b + i] + s[b2 + i]
        elif kernel == 2 and stride == 2:
            b2 = b + d
            if is_max:
                for i in range(n):
                    out[o + i] = _max(s[b + i + i], s[b2 + i + i])
            else:
                for i in range(n):
                    out[o + i] = s[b + i + i] + s[b2 + i + i]
        else:
            st = np.uint64(stride)
            for i in range(n):
                out[o + i] = s[b + i * st]
            for j in range(1, kernel):
                bj = b + np.uint64(j) * d
                if is_max:
                    for i in range(n):
                        out[o + i] = _max(out[o + i], s[bj + i * st])
                else:
                    for i in range(n):
                        out[o + i] += s[bj + i * st]


@numba.njit(cache=True)
def _horizontal(
    scratch: np.ndarray,  # the rows' reductions (see _vertical), rows of stride_w * row_w
    row_w: int,  # length of the rows written to dest (OW, or more: see _pool_2d)
    kernel_w: int,
    stride_w: int,
    pad_left: int,
    dilation_w: int,
    is_max: bool,
    dest: np.ndarray,  # flat
    plane: int,  # offset of the chunk's first plane in dest
    rows: int,  # output rows of the chunk: planes * OH (its planes' rows follow each other)
) -> None:
    """Every window's columns reduced in one flat loop over the chunk: scratch rows are exactly
    stride_w times as long as dest rows, so output j reads scratch[j * stride - pad_left + t *
    dilation]. Columns whose windows leave the row read the neighbouring row here: _border_columns
    overwrites them."""
    pitch = stride_w * row_w
    limit = rows * pitch - 1 - (kernel_w - 1) * dilation_w + pad_left  # reads stay in: j * stride <= limit
    j0 = (pad_left + stride_w - 1) // stride_w
    j1 = min(rows * row_w, limit // stride_w + 1)
    if j1 > j0:
        _reduce_columns(
            scratch, j0 * stride_w - pad_left, kernel_w, stride_w, dilation_w, is_max, dest, plane + j0, j1 - j0,
            1, 0, 0,
        )  # fmt: skip


@numba.njit(cache=True)
def _border_columns(
    scratch: np.ndarray,  # rows of stride_w * row_w
    row_w: int,
    stride_w: int,
    pad_left: int,
    dilation_w: int,
    x_lo: np.ndarray,  # (OW,)
    x_hi: np.ndarray,
    col_first: int,
    col_last: int,
    is_max: bool,
    dest: np.ndarray,  # flat, rows of row_w
    plane: int,  # offset of the chunk's first plane in dest
    rows: int,  # output rows of the chunk: planes * OH
) -> None:
    """Output columns whose windows leave the row: the reduction of their valid taps only (none:
    the neutral value), one loop over the chunk's rows per column."""
    w, ow, d = np.uint64(stride_w * row_w), np.uint64(row_w), np.uint64(dilation_w)
    for ox in range(x_lo.shape[0]):
        if col_first <= ox < col_last:
            continue
        taps = x_hi[ox] - x_lo[ox]
        o = np.uint64(plane + ox)
        if taps <= 0:
            neutral = np.float32(-np.inf) if is_max else np.float32(0.0)
            for r in range(np.uint64(rows)):
                dest[o + r * ow] = neutral
            continue
        b = np.uint64(ox * stride_w - pad_left + x_lo[ox] * dilation_w)
        if taps == 1:
            for r in range(np.uint64(rows)):
                dest[o + r * ow] = scratch[b + r * w]
            continue
        b2 = b + d
        if is_max:
            for r in range(np.uint64(rows)):
                dest[o + r * ow] = _max(scratch[b + r * w], scratch[b2 + r * w])
        else:
            for r in range(np.uint64(rows)):
                dest[o + r * ow] = scratch[b + r * w] + scratch[b2 + r * w]
        for t in range(2, taps):
            bt = b + np.uint64(t) * d
            if is_max:
                for r in range(np.uint64(rows)):
                    dest[o + r * ow] = _max(dest[o + r * ow], scratch[bt + r * w])
            else:
                for r in range(np.uint64(rows)):
                    dest[o + r * ow] += scratch[bt + r * w]


@numba.njit(cache=True)
def _pool_2x2_direct(
    src: np.ndarray,
    plane_in: int,
    width: int,
    out_h: int,
    out_w: int,
    is_max: bool,
    dest: np.ndarray,
    plane: int,
) -> None:
    """2x2 windows at stride 2 that never leave the plane (VGG, YOLO, LeNet): each output row from
    its two input rows in one pass (LLVM vectorises the interleaved loads)."""
    n = np.uint64(out_w)
    for oy in range(out_h):
        top = np.uint64(plane_in + 2 * oy * width)
        bottom = top + np.uint64(width)
        o = np.uint64(plane + oy * out_w)
        if is_max:
            for i in range(n):
                out_value = _max(_max(src[top + i + i], src[top + i + i + np.uint64(1)]), src[bottom + i + i])
                dest[o + i] = _max(out_value, src[bottom + i + i + np.uint64(1)])
        else:
            for i in range(n):
                dest[o + i] = (src[top + i + i] + src[top + i + i + np.uint64(1)]) + (
                    src[bottom + i + i] + src[bottom + i + i + np.uint64(1)]
                )


@numba.njit(inline="always", cache=True)
def _row_phases(
    src: np.ndarray,
    at: int,  # offset of the window's first input row (all three inside the plane)
    width: int,
    is_max: bool,
    lead: int,  # pad_left % 2: input column 0 lands on an odd padded column
    first: int,  # phase cell of the first column pair
    pairs: int,
    tail: bool,  # one even padded column left after the pairs
    even: np.ndarray,  # padded even columns' reductions, by padded column // 2
    odd: np.ndarray,  # padded odd columns'
) -> None:
    """Reduce the window's three rows column by column, dealing the padded columns into ``even`` and
    ``odd`` as they are written: the row's columns are read in pairs, which LLVM vectorises with
    permutes. Cells the input does not reach are not written (they hold the neutral value)."""
    one, w = np.uint64(1), np.uint64(width)
    u = np.uint64(at)
    u2, u3 = u + w, u + w + w
    f = np.uint64(first)
    if lead == 1:
        if is_max:
            odd[f - one] = _max(_max(src[u], src[u2]), src[u3])
        else:
            odd[f - one] = (src[u] + src[u2]) + src[u3]
    a, a2, a3 = u + np.uint64(lead), u2 + np.uint64(lead), u3 + np.uint64(lead)
    if is_max:
        for k in range(np.uint64(pairs)):
            even[f + k] = _max(_max(src[a + k + k], src[a2 + k + k]), src[a3 + k + k])
            odd[f + k] = _max(_max(src[a + k + k + one], src[a2 + k + k + one]), src[a3 + k + k + one])
    else:
        for k in range(np.uint64(pairs)):
            even[f + k] = (src[a + k + k] + src[a2 + k + k]) + src[a3 + k + k]
            odd[f + k] = (src[a + k + k + one] + src[a2 + k + k + one]) + src[a3 + k + k + one]
    if tail:
        t = np.uint64(lead + 2 * pairs)
        if is_max:
            even[f + np.uint64(pairs)] = _max(_max(src[u + t], src[u2 + t]), src[u3 + t])
        else:
            even[f + np.uint64(pairs)] = (src[u + t] + src[u2 + t]) + src[u3 + t]


@numba.njit(inline="always", cache=True)
def _border_row_phases(
    src: np.ndarray,
    at: int,
    width: int,
    taps: int,  # rows of the window inside the plane: 0 to 2 (padding, ceil_mode)
    is_max: bool,
    lead: int,
    first: int,
    pairs: int,
    tail: bool,
    even: np.ndarray,
    odd: np.ndarray,
) -> None:
    """_row_phases for a window cut by the plane's top or bottom, column by column. Apart from
    _row_phases on purpose: in one function, this loop kept LLVM from vectorising that one."""
    neutral = np.float32(-np.inf) if is_max else np.float32(0.0)
    for x in range(lead + 2 * pairs + (1 if tail else 0)):
        value = neutral
        if taps > 0:
            value = src[at + x]
            for t in range(1, taps):
                v = src[at + t * width + x]
                value = _max(value, v) if is_max else value + v
        column = first - lead + (x + lead) // 2  # phase cell of padded column x + pad_left
        if (x + lead) % 2 == 1:
            odd[column] = value
        else:
            even[column] = value


@numba.njit(inline="always", cache=True)
def _pool_3x3_s2_rows(
    src: np.ndarray,
    plane_in: int,  # offset of the input plane
    width: int,
    pad_top: int,
    y_lo: np.ndarray,
    y_hi: np.ndarray,
    lead: int,
    first: int,
    pairs: int,
    tail: bool,
    is_max: bool,
    even: np.ndarray,  # (OW + 1,), neutral where the input does not reach
    odd: np.ndarray,
    dest: np.ndarray,  # flat
    plane: int,  # offset of the output plane in dest
    out_w: int,
) -> None:
    """3x3 windows at stride 2 (SqueezeNet, GoogLeNet, ResNet): each output row's window rows are
    reduced into its padded row's even and odd columns (_row_phases), then output ox is the
    reduction of even[ox], odd[ox] and even[ox + 1], three contiguous loads. Padding and ceil_mode's
    windows read the neutral cells, so no column is a border case."""
    one = np.uint64(1)
    for oy in range(y_lo.shape[0]):
        taps = y_hi[oy] - y_lo[oy]
        at = plane_in + (oy * 2 - pad_top + y_lo[oy]) * width if taps > 0 else plane_in
        if taps == 3:
            _row_phases(src, at, width, is_max, lead, first, pairs, tail, even, odd)
        else:
            _border_row_phases(src, at, width, taps, is_max, lead, first, pairs, tail, even, odd)
        o = np.uint64(plane + oy * out_w)
        if is_max:
            for i in range(np.uint64(out_w)):
                dest[o + i] = _max(_max(even[i], odd[i]), even[i + one])
        else:
            for i in range(np.uint64(out_w)):
                dest[o + i] = (even[i] + odd[i]) + even[i + one]


@numba.njit(cache=True)
def _finish(
    pooled: np.ndarray,  # the chunk's maxima or sums, rows of row_w >= OW
    row_w: int,
    dest: np.ndarray,  # flat output
    plane: int,  # offset of the chunk's first plane in dest
    rows: int,  # planes * OH
    out_w: int,
    divisor: np.ndarray,  # (OH * OW,)
    is_max: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
) -> None:
    """dest = act(pooled), sums divided by their tap counts first, from the first OW of every
    pooled row (one flat loop per plane where rows are OW long). From a separate buffer on
    purpose: in place, LLVM turns ReLU's select into a masked store (keep the value where it is
    positive), which some CPUs run far slower than a plain vector store."""
    out_h = divisor.shape[0] // out_w
    if row_w == out_w:
        length, segments, per_plane, pitch = out_h * out_w, rows // out_h, 1, out_h * out_w
    else:
        length, segments, per_plane, pitch = out_w, rows, out_h, row_w
    n, zero = np.uint64(length), np.float32(0.0)
    for segment in range(segments):
        o = np.uint64(plane + segment * length)
        q = np.uint64(segment * pitch)
        c = np.uint64(segment % per_plane * length)  # this segment's divisors
        if kind == 0:
            for i in range(n):
                dest[o + i] = pooled[q + i] if is_max else pooled[q + i] / divisor[c + i]
        elif kind == 1:
            for i in range(n):
                v = pooled[q + i] if is_max else pooled[q + i] / divisor[c + i]
                dest[o + i] = zero if v <= zero else v  # NaN stays NaN, as in activate
        else:
            for i in range(n):
                v = pooled[q + i] if is_max else pooled[q + i] / divisor[c + i]
                dest[o + i] = activate(v, kind, alpha, low, high)


@numba.njit(cache=True)
def _divisors(y_count: np.ndarray, x_count: np.ndarray) -> np.ndarray:
    """(OH * OW,) tap counts of the average's windows as float32; NaN where a window has none (0/0)."""
    out_h, out_w = y_count.shape[0], x_count.shape[0]
    divisor = np.empty(out_h * out_w, dtype=np.float32)
    for oy in range(out_h):
        for ox in range(out_w):
            count = y_count[oy] * x_count[ox]
            divisor[oy * out_w + ox] = count if count > 0 else np.nan
    return divisor


def _pool_2d(
    x: np.ndarray,  # (N, C, H, W), C-contiguous
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    pad_bottom: int,
    pad_right: int,
    dilation_h: int,
    dilation_w: int,
    is_max: bool,
    count_include_pad: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    workers: int,  # parallel jobs: the caller's numba thread count (reading it here defeats caching)
    out: np.ndarray,  # (N, C, OH, OW), C-contiguous, written
) -> None:
    """Windows may run past the padded input (ceil_mode): those taps never count. With
    count_include_pad, average divides by the taps inside the *padded* input. Max propagates NaN.
    Each worker takes a contiguous run of planes and a scratch of its own. Compiled twice (below):
    parallel, and serial for small layers (prange is range there: no parallel region to start)."""
    batch, channels, height, width = x.shape
    out_h, out_w = out.shape[2], out.shape[3]
    planes = batch * channels
    if planes == 0 or out_h == 0 or out_w == 0:
        return
    y_lo, y_hi, y_padded = _tap_ranges(out_h, stride_h, pad_top, pad_bottom, dilation_h, height, kernel_h)
    x_lo, x_hi, x_padded = _tap_ranges(out_w, stride_w, pad_left, pad_right, dilation_w, width, kernel_w)
    row_first, row_last = _interior(y_lo, y_hi, kernel_h)
    col_first, col_last = _interior(x_lo, x_hi, kernel_w)
    divisor = _divisors(y_padded, x_padded) if count_include_pad else _divisors(y_hi - y_lo, x_hi - x_lo)
    direct = (
        kernel_h == 2 and kernel_w == 2 and stride_h == 2 and stride_w == 2 and dilation_h == 1
        and dilation_w == 1 and row_first == 0 and row_last == out_h and col_first == 0 and col_last == out_w
    )  # fmt: skip
    phased = (
        kernel_h == 3 and kernel_w == 3 and stride_h == 2 and stride_w == 2 and dilation_h == 1 and dilation_w == 1
        and width >= PHASED_MIN_WIDTH
    )  # fmt: skip
    # phased: padded column X of a row goes to phase cell X // 2 of even or odd; cells up to OW
    lead = pad_left % 2
    first = (pad_left + lead) // 2
    pairs = max(0, min((width - lead) // 2, out_w + 1 - first))
    tail = lead + 2 * pairs < width and first + pairs <= out_w
    src = x.reshape(x.size)
    dest = out.reshape(out.size)
    plane_in, plane_out = height * width, out_h * out_w
    # rows of the pooled result: OW, or longer so that scratch rows (stride_w times as long) hold
    # the whole input row and the column loop stays one flat loop (odd widths: SqueezeNet, AlexNet)
    row_w = out_w if direct or phased else max(out_w, (width + stride_w - 1) // stride_w)
    pitch = stride_w * row_w  # scratch row length; columns past W stay neutral
    finish = not is_max or kind != 0 or row_w != out_w  # pool into a buffer, then dest = act(pooled)
    workers = max(1, min(workers, planes))
    chunk = max(1, SCRATCH_FLOATS // max(1, out_h * pitch))  # planes per call of the loops below
    neutral = np.float32(-np.inf) if is_max else np.float32(0.0)
    for worker in numba.prange(workers):
        start, last = worker * planes // workers, (worker + 1) * planes // workers
        most = min(chunk, last - start)
        size = 0 if direct or phased else most * out_h * pitch
        scratch = np.full(size, neutral, np.float32) if pitch > width else np.empty(size, np.float32)
        pooled = np.empty(most * out_h * row_w if finish else 0, dtype=np.float32)
        even = np.full(out_w + 1 if phased else 0, neutral, np.float32)
        odd = np.full(out_w + 1 if phased else 0, neutral, np.float32)
        target = pooled if finish else dest
        for p in range(start, last, chunk):
            count = min(chunk, last - p)
            base = 0 if finish else p * plane_out  # of the chunk's first plane in target
            if phased:
                for q in range(count):
                    _pool_3x3_s2_rows(
                        src, (p + q) * plane_in, width, pad_top, y_lo, y_hi, lead, first, pairs, tail, is_max,
                        even, odd, target, base + q * plane_out, out_w,
                    )  # fmt: skip
            elif direct:
                for q in range(count):
                    _pool_2x2_direct(
                        src, (p + q) * plane_in, width, out_h, out_w, is_max, target, base + q * plane_out
                    )
            else:
                _vertical(
                    src, p * plane_in, count, plane_in, width, pitch, stride_h, pad_top, dilation_h, kernel_h,
                    y_lo, y_hi, row_first, row_last, is_max, scratch,
                )  # fmt: skip
                if col_last > col_first:
                    _horizontal(
                        scratch, row_w, kernel_w, stride_w, pad_left, dilation_w, is_max, target, base,
                        count * out_h,
                    )  # fmt: skip
                if col_first > 0 or col_last < out_w:
                    _border_columns(
                        scratch, row_w, stride_w, pad_left, dilation_w, x_lo, x_hi, col_first, col_last, is_max,
                        target, base, count * out_h,
                    )  # fmt: skip
            if finish:
                _finish(
                    pooled,
                    row_w,
                    dest,
                    p * plane_out,
                    count * out_h,
                    out_w,
                    divisor,
                    is_max,
                    kind,
                    alpha,
                    low,
                    high,
                )


pool_2d, pool_2d_serial = parallel_and_serial(_pool_2d, "pool_2d")
"""pool_2d (parallel over planes) and pool_2d_serial (on the calling thread, for small layers)."""


_SUMS = {"reassoc", "contract"}
"""fastmath's "reassoc" lets LLVM split each plane's sum over vector lanes: in order, every add
waited for the previous one. No flag assumes away NaN or inf, so max still propagates NaN."""


@numba.njit(inline="always", cache=True, fastmath=_SUMS)
def _global_planes(planes: np.ndarray, is_max: bool, out: np.ndarray, first: int, end: int) -> None:
    """out[p] = mean (accumulated in float64, ``plane_sum``) or max (NaN-propagating) of planes[p],
    first <= p < end: one vectorised pass per plane."""
    size = planes.shape[1]
    if not is_max:
        flat = planes.reshape(-1)
        for p in range(first, end):
            out[p] = plane_sum(flat, np.uint64(p) * np.uint64(size), np.uint64(size)) / size
        return
    for p in range(first, end):
        row = planes[p]
        best = -np.inf
        for i in range(size):
            v = row[i]
            if v > best or v != v:
                best = v
        out[p] = best


@numba.njit(parallel=True, nogil=True, cache=True, fastmath=_SUMS)
def global_pool(
    planes: np.ndarray,  # (N*C, H*W)
    is_max: bool,
    out: np.ndarray,  # (N*C,), written
    workers: int,  # the caller's numba thread count
) -> None:
    """Mean or max of every plane, a contiguous run of planes per worker: one task per thread, not
    one per plane, so that starting the region costs the same whatever the batch and channels."""
    count = planes.shape[0]
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, count)
        _global_planes(planes, is_max, out, first, end)


@numba.njit(nogil=True, cache=True, fastmath=_SUMS)
def global_pool_serial(planes: np.ndarray, is_max: bool, out: np.ndarray) -> None:
    """``global_pool`` on the calling thread, without a parallel region (tensors below the grain)."""
    _global_planes(planes, is_max, out, 0, planes.shape[0])
