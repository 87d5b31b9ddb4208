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
from edgecnn.kernels.cpu.system.threads import call, is_small
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs, pool_geometry
from edgecnn.ops.quant import average_windows, global_average_multiplier


@numba.njit(inline="always", cache=True)
def _larger(a: np.integer, b: np.integer) -> np.integer:
    return a if a > b else b


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
    out: np.ndarray,  # (planes, OH, OW), x's type
) -> None:
    """The largest tap of each window; padding taps are skipped (they read -inf in float).
    Separable: each output row first takes the largest of its window's input rows (a line of the
    input's width), then of that line's window columns. Offsets are unsigned and no views are made,
    and each window column's reach is found once: short rows stay cheap."""
    planes, height, width = x.shape
    out_h, out_w = out.shape[1], out.shape[2]
    src, dst = x.reshape(-1), out.reshape(-1)
    firsts = np.empty(kernel_w, np.uint64)  # per window column: the first output column inside the image,
    counts = np.zeros(kernel_w, np.uint64)  # how many are, and the line position the first one reads
    reads = np.zeros(kernel_w, np.uint64)
    for kx in range(kernel_w):
        offset = kx * dilation_w - pad_left
        first = max(0, (stride_w - 1 - offset) // stride_w)
        end = min(out_w, (width - 1 - offset) // stride_w + 1) if offset < width else 0
        firsts[kx] = first
        counts[kx] = max(0, end - first)
        reads[kx] = max(0, first * stride_w + offset)
    w, ow, sw = np.uint64(width), np.uint64(out_w), np.uint64(stride_w)
    for p in numba.prange(planes):
        line = np.empty(width, x.dtype)
        plane = np.uint64(p) * np.uint64(height) * w
        for oy in range(out_h):
            for i in range(w):
                line[i] = lowest
            for ky in range(kernel_h):
                y = oy * stride_h - pad_top + ky * dilation_h
                if 0 <= y < height:
                    row = plane + np.uint64(y) * w
                    for i in range(w):
                        line[i] = _larger(line[i], src[row + i])
            o = (np.uint64(p) * np.uint64(out_h) + np.uint64(oy)) * ow
            for i in range(ow):
                dst[o + i] = lowest
            for kx in range(kernel_w):
                d, u = o + firsts[kx], reads[kx]
                for i in range(counts[kx]):
                    dst[d + i] = _larger(dst[d + i], line[u + i * sw])


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
