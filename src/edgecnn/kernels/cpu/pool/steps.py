"""MaxPool, AveragePool (2-D: pads, ceil_mode, count_include_pad, dilations, SAME padding), their
fused forms with an activation (FusedMaxPool, FusedAveragePool) and GlobalAveragePool/GlobalMaxPool
on the CPU, through the compiled loops of pool/loops.py."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.gemm.epilogue import activation_args
from edgecnn.kernels.cpu.pool.loops import (
    SCRATCH_FLOATS,
    global_pool,
    global_pool_serial,
    pool_2d,
    pool_2d_serial,
)
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import is_float32, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import current_threads, is_small, max_threads
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs, pool_geometry

SPARE_STRIDE = 64
"""pool_2d takes strides up to this much wider than the padded input and its window; wider ones (at
most two windows per row, each scratch row as long as the stride) run on the reference kernel."""


def when_pool_2d(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    if not (single_output(node) and types and is_float32(types[0], 4)):
        return False
    if not isinstance(node.attrs, MaxPoolAttrs | AveragePoolAttrs):
        return False
    shape = shape_of(types[0])
    geo = pool_geometry(node.attrs, shape)
    if geo.pads is None or not all(isinstance(d, int) and d > 0 for d in geo.out):
        return False
    # pool_2d's scratch rows hold stride_w floats per output column: a stride far wider than the
    # padded input and its window (one or two windows per row) would make them that long for nothing
    reach = shape[3] + geo.pads[1] + geo.pads[3] + (geo.kernel[1] - 1) * geo.dilations[1] + 1
    return geo.strides[1] <= reach + SPARE_STRIDE


def pool_2d_workspace(x_shape: Sequence[int], out_shape: Sequence[int], stride_w: int) -> int:
    """Bytes one call of pool_2d allocates (loops._pool_2d): each axis's tap ranges (three int64 per
    output row or column), the average's divisors (a float32 per output pixel) and, per worker,
    its scratch and pooled rows (at most SCRATCH_FLOATS, or one plane's rows of ``stride_w`` floats
    per output column) and the phase rows; planning counts them with the arena."""
    planes, width = x_shape[0] * x_shape[1], x_shape[3]
    out_h, out_w = out_shape[2], out_shape[3]
    pitch = stride_w * max(out_w, -(-width // stride_w))
    per_worker = 2 * max(SCRATCH_FLOATS, out_h * pitch) + 2 * (out_w + 1)
    return 24 * (out_h + out_w) + 4 * (out_h * out_w + min(planes, max_threads()) * per_worker)


class Pool2d:
    """Max or average pooling over 2-D windows, parallel over (image, channel) planes; a fused
    op's activation is applied to each pooled plane as it is finished."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        attrs = node.attrs
        x_shape = shape_of(types[0])
        geo = pool_geometry(attrs, x_shape)
        assert geo.pads is not None
        self.kernel = (int(geo.kernel[0]), int(geo.kernel[1]))
        self.strides = (geo.strides[0], geo.strides[1])
        self.dilations = (geo.dilations[0], geo.dilations[1])
        self.pads = tuple(int(p) for p in geo.pads)  # top, left, bottom, right
        self.is_max = isinstance(attrs, MaxPoolAttrs)
        self.count_include_pad = bool(getattr(attrs, "count_include_pad", False))
        self.activation = activation_args(attrs)  # (kind, alpha, low, high); kind 0 for plain pools
        self.out_shape = (x_shape[0], x_shape[1], int(geo.out[0]), int(geo.out[1]))
        self.small = is_small(int(np.prod(self.out_shape)) * self.kernel[0] * self.kernel[1])
        self.workspace = pool_2d_workspace(x_shape, self.out_shape, self.strides[1])

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=np.float32)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        top, left, bottom, right = self.pads
        (pool_2d_serial if self.small else pool_2d)(  # small: no parallel region to start
            np.ascontiguousarray(x),
            self.kernel[0],
            self.kernel[1],
            self.strides[0],
            self.strides[1],
            top,
            left,
            bottom,
            right,
            self.dilations[0],
            self.dilations[1],
            self.is_max,
            self.count_include_pad,
            *self.activation,
            1 if self.small else current_threads(),
            out,
        )


def when_global(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    return single_output(node) and bool(types) and is_float32(types[0]) and len(shape_of(types[0])) >= 3


class GlobalPool:
    """Mean or max over all spatial positions of every (image, channel) plane."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        shape = shape_of(types[0])
        self.is_max = node.op == "GlobalMaxPool"
        self.planes = shape[0] * shape[1]
        self.plane_size = int(np.prod(shape[2:]))
        self.out_shape = (shape[0], shape[1], *([1] * (len(shape) - 2)))
        self.small = is_small(self.planes * self.plane_size)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=np.float32)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        planes = np.ascontiguousarray(x).reshape(self.planes, self.plane_size)
        if self.small:  # no parallel region to start
            global_pool_serial(planes, self.is_max, out.reshape(self.planes))
        else:
            global_pool(planes, self.is_max, out.reshape(self.planes), current_threads())


register("pool_2d", Pool2d, when=when_pool_2d)
register("global_pool", GlobalPool, when=when_global)
