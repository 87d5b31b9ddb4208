"""Nearest-neighbour Resize of the last two axes on the CPU (a detector's 2x upsampling in its
feature pyramid): one compiled gather, where the reference takes one ``np.take`` pass per axis.

Which input row and column each output row and column reads is computed once, when the plan is
built, by the reference's own coordinate transform and rounding (``edgecnn.ops.resize``), so every
coordinate and nearest mode gives the reference's result. Resizes of any other axis, and
tf_crop_and_resize (whose extrapolated pixels are not gathers), decline the node.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import shape_of, single_output
from edgecnn.kernels.cpu.system.threads import current_threads, is_small, worker_share
from edgecnn.ops.resize import ResizeAttrs, check_attrs, nearest_indices, output_geometry, source_coordinates


@numba.njit(inline="always", cache=True)
def _gather_rows(
    x: np.ndarray, rows: np.ndarray, columns: np.ndarray, out: np.ndarray, first: int, end: int
) -> None:
    """Output rows [first, end) of the (planes * out_height) rows: x (planes, h, w) -> out (planes * oh, ow)."""
    out_height = rows.shape[0]
    for r in range(first, end):
        plane = r // out_height
        source = x[plane, rows[r - plane * out_height]]
        dest = out[r]
        for j in range(columns.shape[0]):
            dest[j] = source[columns[j]]


@numba.njit(parallel=True, nogil=True, cache=True)
def resize_nearest(
    x: np.ndarray, rows: np.ndarray, columns: np.ndarray, out: np.ndarray, workers: int
) -> None:
    """out[p * oh + i, j] = x[p, rows[i], columns[j]], output rows shared out among ``workers``."""
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, out.shape[0])
        _gather_rows(x, rows, columns, out, first, end)


@numba.njit(nogil=True, cache=True)
def resize_nearest_serial(x: np.ndarray, rows: np.ndarray, columns: np.ndarray, out: np.ndarray) -> None:
    """``resize_nearest`` on the calling thread, for tensors below the thread grain."""
    _gather_rows(x, rows, columns, out, 0, out.shape[0])


def _geometry(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> tuple[tuple[int, ...], np.ndarray, np.ndarray] | None:
    """(output shape, source row per output row, source column per output column), or None when
    the node is not a nearest gather over its last two axes with constant parameters."""
    attrs = node.attrs
    if not isinstance(attrs, ResizeAttrs) or attrs.mode != "nearest":
        return None
    if attrs.coordinate_transformation_mode == "tf_crop_and_resize":
        return None
    check_attrs(attrs)
    given = [values[i] if len(node.inputs) > i and node.inputs[i] else None for i in (2, 3)]
    if any(len(node.inputs) > i and node.inputs[i] and values[i] is None for i in (2, 3)):
        return None  # scales or sizes computed at run time
    shape = shape_of(types[0])
    if len(shape) < 2:
        return None
    out, ratios = output_geometry(attrs, shape, given[0], given[1])
    if any(not isinstance(d, int) or d <= 0 for d in out) or any(r is None for r in ratios[-2:]):
        return None
    leading = zip(out[:-2], shape[:-2], ratios[:-2])
    if any(o != d or r != 1.0 for o, d, r in leading):
        return None
    indices = []
    for axis in (-2, -1):
        size, ratio = out[axis], ratios[axis]
        assert isinstance(size, int) and ratio is not None
        coords = source_coordinates(attrs, size, shape[axis], float(ratio), (0.0, 1.0))
        indices.append(np.ascontiguousarray(nearest_indices(attrs, coords, shape[axis])))
    return tuple(int(d) for d in out), indices[0], indices[1]  # type: ignore[arg-type]


def when_resize(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    t = types[0] if types else None
    return (
        single_output(node)
        and t is not None
        and t.is_concrete
        and np.dtype(t.dtype).itemsize == 4
        and math.prod(shape_of(t)) > 0
        and _geometry(node, types, values) is not None
    )


class ResizeNearest:
    """The source row and column indices, fixed at plan time; 4-byte elements copied as int32."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        geometry = _geometry(node, types, values)
        assert geometry is not None
        self.shape, self.rows, self.columns = geometry
        shape = shape_of(types[0])
        self.planes = (math.prod(shape[:-2]), shape[-2], shape[-1])
        self.out_rows = (self.planes[0] * self.shape[-2], self.shape[-1])
        self.dtype = np.dtype(types[0].dtype)  # type: ignore[union-attr]
        self.small = is_small(math.prod(self.shape))

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the resized shape; must not overlap ``x``)."""
        source = np.ascontiguousarray(x).view(np.int32).reshape(self.planes)
        dest = out.view(np.int32).reshape(self.out_rows)
        if self.small:
            resize_nearest_serial(source, self.rows, self.columns, dest)
        else:
            resize_nearest(source, self.rows, self.columns, dest, current_threads())


register("resize_nearest", ResizeNearest, when=when_resize)
