"""Compiled pooling on 8-bit tensors: MaxPool (2-D, the QDQ pass moves it onto the quantised data
where its input and output share parameters: max commutes with the monotone maps between them),
QLinearGlobalAveragePool (the integer sum of each plane times one float32 multiplier) and 2-D
QLinearAveragePool (float32 sums of the dequantised taps, in the reference's order)."""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.int8.eltwise import concrete_8bit, scalar_constants
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.threads import call, current_threads, is_small
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs, pool_geometry
from edgecnn.ops.quant import average_windows, global_average_multiplier

CHUNK_BYTES = 16384
"""Where input rows are exactly one or two output rows long (_flat_planes), a pass covers as many
planes as fit in this many bytes of scratch (well inside any L1/L2 data cache), so that small
planes make long runs."""


@numba.njit(inline="always", cache=True)
def _larger(a: np.integer, b: np.integer) -> np.integer:
    return a if a > b else b


@numba.njit(inline="always", cache=True)
def _largest_of(
    src: np.ndarray,
    base: np.uint64,
    offsets: np.ndarray,  # uint64 position of each tap (base is at offsets[first])
    first: int,  # the taps [first, end) that count, end > first
    end: int,
    dst: np.ndarray,
    start: np.uint64,
    n: np.uint64,
    step: int,  # a literal at each call (1 or 2), so LLVM sees the access pattern
) -> None:
    """dst[start + i] = the largest of src[base + offsets[k] - offsets[first] + i * step] over the
    taps, for i < n. Up to three taps in one pass, which LLVM turns into byte-wide vector maxima
    (at step 2 with byte permutes): a pass per tap would store and reload dst, and short rows leave
    most of it to scalar tails."""
    u = base - offsets[first]
    t = np.uint64(step)
    if end - first == 1:
        for i in range(n):
            dst[start + i] = src[base + i * t]
        return
    b = u + offsets[first + 1]
    if end - first == 2:
        for i in range(n):
            dst[start + i] = _larger(src[base + i * t], src[b + i * t])
        return
    c = u + offsets[first + 2]
    for i in range(n):
        dst[start + i] = _larger(_larger(src[base + i * t], src[b + i * t]), src[c + i * t])
    for k in range(first + 3, end):
        e = u + offsets[k]
        for i in range(n):
            dst[start + i] = _larger(dst[start + i], src[e + i * t])


@numba.njit(inline="always", cache=True)
def _taps(start: int, dilation: int, kernel: int, size: int) -> tuple[int, int]:
    """[first, end) of the taps k (< kernel) whose position start + k * dilation is in [0, size)."""
    first = max(0, (-start + dilation - 1) // dilation)
    end = min(kernel, (size - 1 - start) // dilation + 1) if start < size else 0
    return first, max(first, end)


@numba.njit(inline="always", cache=True)
def _window_rows(
    src: np.ndarray,
    plane: np.uint64,  # offset of the input plane in src
    height: int,
    width: int,
    top: int,  # input row of the window's first tap (may be negative)
    dilation_h: int,
    row_taps: np.ndarray,  # offset of each window row from the first: ky * dilation_h * W
    lowest: int,
    dst: np.ndarray,
    start: np.uint64,
) -> None:
    """dst[start:start + W] = the column-wise largest of the window's rows inside the plane, the
    lowest value where none is (a window wholly in the padding: ceil_mode, dilations)."""
    k0, k1 = _taps(top, dilation_h, row_taps.shape[0], height)
    w = np.uint64(width)
    if k1 > k0:
        at = plane + np.uint64(top + k0 * dilation_h) * w
        _largest_of(src, at, row_taps, k0, k1, dst, start, w, 1)
    else:
        for i in range(w):
            dst[start + i] = lowest


@numba.njit(cache=True)
def _flat_planes(
    src: np.ndarray,
    plane: np.uint64,  # offset of the first plane in src
    count: int,  # planes, consecutive
    height: int,
    width: int,
    stride_h: int,
    stride_w: int,  # 1 or 2, and W == stride_w * OW
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    lowest: int,
    inner: tuple[int, int],  # output rows [first, end) whose windows lie inside the plane
    row_taps: np.ndarray,  # ky * dilation_h * W
    column_taps: np.ndarray,  # kx * dilation_w
    borders: np.ndarray,  # (columns, 3): output column, first and end tap of windows a row cuts
    rows: np.ndarray,  # (>= count * OH * W,) scratch: each output row's window rows reduced
    dst: np.ndarray,
    o: np.uint64,  # offset of the first output plane in dst
    out_h: int,
) -> None:
    """Planes whose input rows are exactly stride_w times as long as their output rows, each pass
    over all of them at once, since rows of small planes are too short to vectorise on their own.
    At stride_h 1 the window rows are one pass (over the rows whose windows lie inside a plane, or,
    as high as the input, over the planes' rows as one run, the windows that cross into the next
    plane redone); then the columns are one pass (output pixel i reads rows[i * stride_w -
    pad_left + kx * dilation_w]) whose windows that a row's border cuts (``borders``, which read
    the neighbouring row there) are redone."""
    kernel_w = column_taps.shape[0]
    w = np.uint64(width)
    out_w = width // stride_w
    plane_in, plane_rows = np.uint64(height * width), np.uint64(out_h * width)
    first, end = inner
    runs = stride_h == 1 and end > first
    if runs and out_h == height:
        span = count * height * width - int(row_taps[-1])
        if span > 0:
            at = np.uint64(pad_top) * w
            _largest_of(src, plane, row_taps, 0, row_taps.shape[0], rows, at, np.uint64(span), 1)
    elif runs:
        for q in range(count):
            at = plane + np.uint64(q) * plane_in + np.uint64(first - pad_top) * w
            start = np.uint64(q) * plane_rows + np.uint64(first) * w
            _largest_of(src, at, row_taps, 0, row_taps.shape[0], rows, start, np.uint64(end - first) * w, 1)
    for q in range(count):
        for oy in range(out_h):
            if runs and first <= oy < end:
                continue
            top = oy * stride_h - pad_top
            at, start = plane + np.uint64(q) * plane_in, np.uint64(q) * plane_rows + np.uint64(oy) * w
            _window_rows(src, at, height, width, top, dilation_h, row_taps, lowest, rows, start)
    # output pixels [j0, j1) of the run: their taps stay inside it
    total = count * out_h * width
    j0 = -(-pad_left // stride_w)
    j1 = min(count * out_h * out_w, (total - 1 + pad_left - int(column_taps[kernel_w - 1])) // stride_w + 1)
    if j1 > j0:
        at = np.uint64(j0 * stride_w - pad_left)
        n = np.uint64(j1 - j0)
        if stride_w == 1:
            _largest_of(rows, at, column_taps, 0, kernel_w, dst, o + np.uint64(j0), n, 1)
        else:
            _largest_of(rows, at, column_taps, 0, kernel_w, dst, o + np.uint64(j0), n, 2)
    lines = np.uint64(count * out_h)
    ow = np.uint64(out_w)
    for b in range(borders.shape[0]):  # a column at a time, a tap at a time: short, simple loops
        ox, k0, k1 = borders[b, 0], borders[b, 1], borders[b, 2]
        d = o + np.uint64(ox)
        if k1 == k0:
            for r in range(lines):
                dst[d + r * ow] = lowest
            continue
        for k in range(k0, k1):
            u = np.uint64(ox * stride_w - pad_left) + column_taps[k]
            if k == k0:
                for r in range(lines):
                    dst[d + r * ow] = rows[u + r * w]
            else:
                for r in range(lines):
                    dst[d + r * ow] = _larger(dst[d + r * ow], rows[u + r * w])


@numba.njit(cache=True)
def _row_by_row_plane(
    src: np.ndarray,
    plane: np.uint64,
    height: int,
    width: int,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    lowest: int,
    row_taps: np.ndarray,  # ky * dilation_h * W
    column_taps: np.ndarray,  # where window column kx starts: in the line (stride 1, 2), else in phases
    line: np.ndarray,  # (stride_w * cells,): the padded row, lowest outside the input
    phases: np.ndarray,  # line's columns dealt into stride_w phases of cells (empty at stride 1, 2)
    dst: np.ndarray,
    o: np.uint64,
    out_h: int,
    out_w: int,
) -> None:
    """One plane, output row by output row: the window rows reduced into ``line`` (input column c at
    pad_left + c); at stride 2 the window columns read the line at step 2 (byte permutes), at
    strides above 2 it is dealt into phases first (padded column X to phase X % stride_w, cell X //
    stride_w), where each window column kx is one contiguous run of a phase."""
    s = np.uint64(stride_w)
    n = np.uint64(line.shape[0] // stride_w)
    ow = np.uint64(out_w)
    kernel_w = column_taps.shape[0]
    for oy in range(out_h):
        top = oy * stride_h - pad_top
        _window_rows(src, plane, height, width, top, dilation_h, row_taps, lowest, line, np.uint64(pad_left))
        if stride_w == 2:  # the line read at step 2, which LLVM vectorises with byte permutes
            _largest_of(line, column_taps[0], column_taps, 0, kernel_w, dst, o + np.uint64(oy) * ow, ow, 2)
            continue
        cut = line
        if stride_w > 2:
            for r in range(s):
                for j in range(n):
                    phases[np.uint64(r) * n + j] = line[j * s + np.uint64(r)]
            cut = phases
        _largest_of(cut, column_taps[0], column_taps, 0, kernel_w, dst, o + np.uint64(oy) * ow, ow, 1)


@numba.njit(parallel=True, cache=True, nogil=True)
def max_pool_into(
    x: np.ndarray,  # (planes, H, W) 8-bit
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    lowest: int,
    workers: int,  # parallel jobs: the caller's numba thread count (reading it here defeats caching)
    out: np.ndarray,  # (planes, OH, OW), x's type
) -> None:
    """The largest tap of each window; padding taps are skipped (they read -inf in float).

    Separable, every loop at unit stride or a literal stride of 2, so that LLVM turns it into
    byte-wide vector maxima: first each output row's window rows, then that result's window
    columns. Where input rows are exactly one or two output rows long (the padded 3x3 pools of
    Inception blocks, 3x3 and 2x2 pools at stride 2 on even widths), each pass runs over several
    planes at once (_flat_planes), else row by row (_row_by_row_plane). Each worker takes a
    contiguous run of planes and allocates its buffers once."""
    planes, height, width = x.shape
    out_h, out_w = out.shape[1], out.shape[2]
    src, dst = x.reshape(-1), out.reshape(-1)
    flat = stride_w <= 2 and width == stride_w * out_w
    row_taps = np.arange(kernel_h).astype(np.uint64) * np.uint64(dilation_h * width)
    # row by row: the padded line, long enough for every window's last tap, dealt into phases
    cells = max(-(-(pad_left + width) // stride_w), out_w + (kernel_w - 1) * dilation_w // stride_w)
    span = 0 if flat else stride_w * cells
    column_taps = np.empty(kernel_w, np.uint64)
    for kx in range(kernel_w):
        tap = kx * dilation_w
        column_taps[kx] = tap if stride_w <= 2 else tap % stride_w * cells + tap // stride_w
    inner_first = min(out_h, -(-pad_top // stride_h))
    inner_end = min(out_h, (height - 1 + pad_top - (kernel_h - 1) * dilation_h) // stride_h + 1)
    inner = (inner_first, max(inner_first, inner_end))
    # flat: the output columns whose windows a row's border cuts, and their taps inside it
    cut = np.zeros(out_w if flat else 0, np.bool_)
    for ox in range(cut.shape[0]):
        cut[ox] = ox * stride_w < pad_left or ox * stride_w - pad_left + (kernel_w - 1) * dilation_w >= width
    borders = np.empty((int(cut.sum()), 3), np.int64)
    b = 0
    for ox in range(cut.shape[0]):
        if cut[ox]:
            k0, k1 = _taps(ox * stride_w - pad_left, dilation_w, kernel_w, width)
            borders[b, 0], borders[b, 1], borders[b, 2] = ox, k0, k1
            b += 1
    workers = max(1, min(workers, planes))
    chunk = max(1, CHUNK_BYTES // max(1, out_h * width))  # flat: planes per pass
    for worker in numba.prange(workers):
        line = np.full(span, lowest, x.dtype)  # columns outside the input stay the lowest value
        phases = np.empty(span if stride_w > 2 else 0, x.dtype)
        rows = np.empty(chunk * out_h * width if flat else 0, x.dtype)
        first, end = worker * planes // workers, (worker + 1) * planes // workers
        if flat:
            for p in range(first, end, chunk):
                _flat_planes(
                    src, np.uint64(p * height * width), min(chunk, end - p), height, width, stride_h, stride_w, pad_top,
                    pad_left, dilation_h, lowest, inner, row_taps, column_taps, borders, rows, dst,
                    np.uint64(p * out_h * out_w), out_h,
                )  # fmt: skip
        else:
            for p in range(first, end):
                _row_by_row_plane(
                    src, np.uint64(p * height * width), height, width, stride_h, stride_w, pad_top, pad_left,
                    dilation_h, lowest, row_taps, column_taps, line, phases, dst, np.uint64(p * out_h * out_w),
                    out_h, out_w,
                )  # fmt: skip


def when_max_pool(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    x = types[0] if types else None
    if not (concrete_8bit(x) and len(node.outputs) == 1 and isinstance(node.attrs, MaxPoolAttrs)):
        return False
    assert x is not None
    if len(x.dims) != 4:
        return False
    geo = pool_geometry(node.attrs, x.dims)
    return geo.pads is not None and all(isinstance(d, int) and d > 0 for d in geo.out)


class MaxPool8Bit:
    """2-D max pooling of int8/uint8 planes, parallel over (image, channel) planes."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        x = types[0]
        assert x is not None
        shape = x.dims
        geo = pool_geometry(node.attrs, shape)
        assert geo.pads is not None
        self.dtype = np.dtype(x.dtype)
        self.geometry = (
            int(geo.kernel[0]),
            int(geo.kernel[1]),
            int(geo.strides[0]),
            int(geo.strides[1]),
            int(geo.pads[0]),
            int(geo.pads[1]),
            int(geo.dilations[0]),
            int(geo.dilations[1]),
            int(np.iinfo(self.dtype).min),
        )
        self.planes = (shape[0] * shape[1], shape[2], shape[3])
        self.out_shape = (shape[0], shape[1], int(geo.out[0]), int(geo.out[1]))
        self.small = is_small(int(np.prod(self.out_shape)) * self.geometry[0] * self.geometry[1])

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=self.dtype)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        planes = np.ascontiguousarray(x).reshape(self.planes)
        call(
            max_pool_into,
            self.small,
            planes,
            *self.geometry,
            1 if self.small else current_threads(),
            out.reshape(self.planes[0], *self.out_shape[2:]),
        )


@numba.njit(parallel=True, cache=True, nogil=True)
def global_average_into(
    x: np.ndarray, bias: int, multiplier: float, zero_point: int, lo: int, hi: int, out: np.ndarray
) -> None:
    """out[p] = clamp(rint(float32(sum(x[p]) + bias) * multiplier) + zero_point, lo, hi)."""
    m = np.float32(multiplier)
    for p in numba.prange(x.shape[0]):
        acc = np.int32(bias)
        for i in range(x.shape[1]):
            acc += np.int32(x[p, i])
        v = np.rint(np.float32(acc) * m) + np.float32(zero_point)
        out[p] = np.int32(min(max(v, np.float32(lo)), np.float32(hi)))


def when_global_average(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    x = types[0] if types else None
    return (
        concrete_8bit(x)
        and x is not None
        and len(x.dims) >= 3
        and len(node.outputs) == 1
        and scalar_constants(values, (1, 2, 3, 4))
    )


class QLinearGlobalAverage:
    """The requantised mean of every (image, channel) plane of an 8-bit tensor."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        x, (x_scale, x_zp, y_scale, y_zp) = types[0], values[1:5]
        assert x is not None and x_scale is not None and x_zp is not None
        assert y_scale is not None and y_zp is not None
        shape = x.dims
        size = int(np.prod(shape[2:]))
        self.planes = (shape[0] * shape[1], size)
        self.out_shape = (shape[0], shape[1], *([1] * (len(shape) - 2)))
        self.dtype = y_zp.dtype
        info = np.iinfo(self.dtype)
        self.args = (
            -size * int(x_zp.reshape(())),
            float(global_average_multiplier(x_scale, y_scale, size)),
            int(y_zp.reshape(())),
            int(info.min),
            int(info.max),
        )
        self.small = is_small(self.planes[0] * size)

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=self.dtype)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, (N, C, 1, ...))."""
        planes = np.ascontiguousarray(x).reshape(self.planes)
        call(global_average_into, self.small, planes, *self.args, out.reshape(-1))


@numba.njit(parallel=True, cache=True, nogil=True)
def average_pool_into(
    x: np.ndarray,  # (planes, H, W) 8-bit
    windows: np.ndarray,  # (pixels, 5): top, bottom, left, right, count
    x_scale: float,
    x_zero_point: int,
    y_scale: float,
    y_zero_point: int,
    lo: int,
    hi: int,
    out: np.ndarray,  # (planes, pixels)
) -> None:
    """out = clamp(rint(sum(xs * (x - xzp)) / count / ys + yzp)) per window, all in float32."""
    xs, ys, zy = np.float32(x_scale), np.float32(y_scale), np.float32(y_zero_point)
    for p in numba.prange(x.shape[0]):
        for i in range(windows.shape[0]):
            total = np.float32(0)
            for h in range(windows[i, 0], windows[i, 1]):
                for w in range(windows[i, 2], windows[i, 3]):
                    total = np.float32(
                        total + np.float32(np.float32(np.int32(x[p, h, w]) - x_zero_point) * xs)
                    )
            mean = np.float32(total / np.float32(windows[i, 4]))
            v = np.rint(np.float32(np.float32(mean / ys) + zy))
            out[p, i] = np.int32(min(max(v, np.float32(lo)), np.float32(hi)))


def when_average_pool(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    x = types[0] if types else None
    if not (concrete_8bit(x) and x is not None and len(x.dims) == 4 and len(node.outputs) == 1):
        return False
    geo = pool_geometry(node.attrs, x.dims)
    dense = all(d == 1 for d in geo.dilations) and all(isinstance(d, int) and d > 0 for d in geo.out)
    return dense and geo.pads is not None and scalar_constants(values, (1, 2, 3, 4))


class QLinearAverage:
    """2-D average pooling of 8-bit planes, requantised, parallel over (image, channel) planes."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        x, (x_scale, x_zp, y_scale, y_zp) = types[0], values[1:5]
        assert x is not None and x_scale is not None and x_zp is not None
        assert y_scale is not None and y_zp is not None and isinstance(node.attrs, AveragePoolAttrs)
        shape = x.dims
        self.windows, out_hw = average_windows(node.attrs, shape)
        self.planes = (shape[0] * shape[1], shape[2], shape[3])
        self.out_shape = (shape[0], shape[1], *out_hw)
        self.dtype = y_zp.dtype
        info = np.iinfo(self.dtype)
        self.args = (
            float(np.float32(x_scale.reshape(()))),
            int(x_zp.reshape(())),
            float(np.float32(y_scale.reshape(()))),
            int(y_zp.reshape(())),
            int(info.min),
            int(info.max),
        )
        self.small = is_small(int(np.prod(self.out_shape)) * int(np.prod(node.attrs.kernel_shape)))

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=self.dtype)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        planes = np.ascontiguousarray(x).reshape(self.planes)
        call(average_pool_into, self.small, planes, self.windows, *self.args, out.reshape(self.planes[0], -1))


register("int8_max_pool", MaxPool8Bit, when=when_max_pool)
register("int8_average_pool", QLinearAverage, when=when_average_pool)
register("int8_global_average_pool", QLinearGlobalAverage, when=when_global_average)

__all__ = ["MaxPool8Bit", "QLinearAverage", "QLinearGlobalAverage"]
