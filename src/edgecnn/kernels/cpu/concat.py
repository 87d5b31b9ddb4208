"""Concat and Split on the CPU: parts copied along the axis by a compiled loop on numba's threads,
one call per part. Each part is a run of ``length`` elements in each of ``outer`` rows of the whole.

Where every dimension before the axis is 1 (channels at batch 1) the parts are contiguous slabs of
the whole, and the buffer planner usually places them so that the step has nothing to copy
(``slabs`` in edgecnn.ops, runtime/buffers.py); these kernels run where it cannot (a part that is
also returned to the caller, or read by another Concat).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import shape_of
from edgecnn.kernels.cpu.system.threads import current_threads, is_small, worker_share
from edgecnn.ops.common import normalize_axis
from edgecnn.ops.registry import get_op
from edgecnn.ops.shape import ConcatAttrs, SplitAttrs


@numba.njit(inline="always", cache=True)
def _copy_rows(source: np.ndarray, dest: np.ndarray, first: int, end: int) -> None:
    for r in range(first, end):
        into, row = dest[r], source[r]
        for i in range(row.shape[0]):
            into[i] = row[i]


@numba.njit(parallel=True, nogil=True, cache=True)
def copy_rows(source: np.ndarray, dest: np.ndarray, workers: int) -> None:
    """dest[r] = source[r] for 2-D views of the same shape (strided rows), rows shared among workers."""
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, source.shape[0])
        _copy_rows(source, dest, first, end)


@numba.njit(nogil=True, cache=True)
def copy_rows_serial(source: np.ndarray, dest: np.ndarray) -> None:
    """``copy_rows`` on the calling thread, for tensors below the thread grain."""
    _copy_rows(source, dest, 0, source.shape[0])


def _types(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> list[TensorType | None]:
    """The node's output types, inferred from its inputs'."""
    return list(get_op(node.op).infer(node.attrs, types, values))


def _parts(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> tuple[int, int, list[int]] | None:
    """(outer, the whole's row length, each part's row length), or None when the node is not a
    4-byte Concat/Split of concrete, non-empty types."""
    if not isinstance(node.attrs, (ConcatAttrs, SplitAttrs)) or not types or any(not n for n in node.outputs):
        return None
    concat = isinstance(node.attrs, ConcatAttrs)
    ins = list(types) if concat else list(types[:1])
    outs = _types(node, types, values)
    parts, whole = (ins, outs[0]) if concat else (outs, ins[0])
    known = [
        t for t in (*parts, whole) if t is not None and t.is_concrete and np.dtype(t.dtype).itemsize == 4
    ]
    if len(known) != len(parts) + 1 or whole is None or math.prod(shape_of(whole)) == 0:
        return None
    shape = shape_of(whole)
    axis = normalize_axis(node.attrs.axis, len(shape))
    outer = math.prod(shape[:axis])
    lengths = [math.prod(shape_of(t)[axis:]) for t in parts]
    return outer, math.prod(shape[axis:]), lengths


def when_parts(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    return _parts(node, types, values) is not None


class _Parts:
    """Each part's column range in the (outer, whole) view, fixed at plan time."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        found = _parts(node, types, values)
        assert found is not None
        self.outer, self.whole, lengths = found
        self.ranges = [(sum(lengths[:i]), sum(lengths[: i + 1])) for i in range(len(lengths))]
        self.out_types = [
            (shape_of(t), np.dtype(t.dtype)) for t in _types(node, types, values) if t is not None
        ]
        self.small = is_small(self.outer * self.whole)

    def copy(self, source: np.ndarray, dest: np.ndarray) -> None:
        if self.small:
            copy_rows_serial(source, dest)
        else:
            copy_rows(source, dest, current_threads())

    def rows(self, array: np.ndarray) -> np.ndarray:
        """A C-contiguous array viewed as (outer, its row length) int32."""
        return np.ascontiguousarray(array).view(np.int32).reshape(self.outer, -1)


class Concat(_Parts):
    def __call__(self, *xs: np.ndarray) -> np.ndarray:
        shape, dtype = self.out_types[0]
        out = np.empty(shape, dtype)
        self.run_into(out, *xs)
        return out

    def run_into(self, out: np.ndarray, *xs: np.ndarray) -> None:
        """Writes into ``out`` (C-contiguous, the joined shape; must not overlap an input)."""
        whole = self.rows(out)
        for x, (first, end) in zip(xs, self.ranges):
            self.copy(self.rows(x), whole[:, first:end])


class Split(_Parts):
    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray | tuple[np.ndarray, ...]:
        outs = tuple(np.empty(shape, dtype) for shape, dtype in self.out_types)
        self.run_into(outs, x)
        return outs[0] if len(outs) == 1 else outs

    def run_into(self, outs: np.ndarray | tuple[np.ndarray, ...], x: np.ndarray, *_: object) -> None:
        """Writes each part into its array of ``outs`` (one array for a single part; C-contiguous,
        must not overlap ``x``)."""
        whole = self.rows(x)
        for out, (first, end) in zip((outs,) if isinstance(outs, np.ndarray) else outs, self.ranges):
            self.copy(whole[:, first:end], self.rows(out))


register("concat", Concat, when=when_parts)
register("split", Split, when=when_parts)
