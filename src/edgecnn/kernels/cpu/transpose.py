"""Transpose on the CPU: a compiled copy in tiles (ConvNeXt's NCHW <-> NHWC around its channels-last
MLP, a detector head's reordering) on numba's threads, where the reference's ``np.copyto`` of a
strided view runs on one.

At plan time the permutation is collapsed: input axes that stay neighbours, in order, in the output
move as one, and axes of size 1 are dropped, so NCHW -> NHWC is the batched 2-D transpose
(N, C, HW) -> (N, HW, C). Up to four collapsed axes are handled (more decline the node); the last
two output axes are walked in 16 x 16 tiles, so that each input line read is used for a whole tile.
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
from edgecnn.ops.shape import TransposeAttrs, transpose_perm

TILE = 16
RANK = 4

Layout = tuple[tuple[int, int, int, int], tuple[int, int, int, int]]


def collapse_permutation(shape: tuple[int, ...], perm: tuple[int, ...]) -> Layout | None:
    """(the output's sizes, the input's element stride along each) over at most four axes, padded
    in front with (1, 0); None when more remain. Neighbouring output axes whose input strides chain
    (outer = inner * size: consecutive input axes, in order) are merged into one."""
    strides, step = [0] * len(shape), 1
    for axis in reversed(range(len(shape))):
        strides[axis] = step
        step *= shape[axis]
    merged: list[tuple[int, int]] = []  # (size, input stride) per output axis
    for axis in perm:
        size, stride = shape[axis], strides[axis]
        if size == 1:
            continue
        if merged and merged[-1][1] == stride * size:
            merged[-1] = (merged[-1][0] * size, stride)
            continue
        merged.append((size, stride))
    if len(merged) > RANK:
        return None
    padded = [(1, 0)] * (RANK - len(merged)) + merged
    return (
        (padded[0][0], padded[1][0], padded[2][0], padded[3][0]),
        (padded[0][1], padded[1][1], padded[2][1], padded[3][1]),
    )


@numba.njit(inline="always", cache=True)
def _tiles(
    x: np.ndarray,
    out: np.ndarray,
    sizes: tuple[int, int, int, int],
    s: tuple[int, int, int, int],
    first: int,
    end: int,
) -> None:
    d1, d2, d3 = sizes[1], sizes[2], sizes[3]
    rows, columns = (d2 + TILE - 1) // TILE, (d3 + TILE - 1) // TILE
    for task in range(first, end):
        b3 = task % columns
        rest = task // columns
        b2 = rest % rows
        rest = rest // rows
        o1 = rest % d1
        o0 = rest // d1
        base_in = o0 * s[0] + o1 * s[1]
        base_out = (o0 * d1 + o1) * d2
        for j2 in range(b2 * TILE, min(b2 * TILE + TILE, d2)):
            src = base_in + j2 * s[2]
            dst = (base_out + j2) * d3
            for j3 in range(b3 * TILE, min(b3 * TILE + TILE, d3)):
                out[dst + j3] = x[src + j3 * s[3]]


@numba.njit(parallel=True, nogil=True, cache=True)
def transpose_tiles(
    x: np.ndarray,
    out: np.ndarray,
    sizes: tuple[int, int, int, int],
    s: tuple[int, int, int, int],
    workers: int,
) -> None:
    """out (flat, C order over ``sizes``) = x (flat) read at strides ``s``, tiles shared among workers."""
    tasks = sizes[0] * sizes[1] * ((sizes[2] + TILE - 1) // TILE) * ((sizes[3] + TILE - 1) // TILE)
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, tasks)
        _tiles(x, out, sizes, s, first, end)


@numba.njit(nogil=True, cache=True)
def transpose_tiles_serial(
    x: np.ndarray, out: np.ndarray, sizes: tuple[int, int, int, int], s: tuple[int, int, int, int]
) -> None:
    """``transpose_tiles`` on the calling thread, for tensors below the thread grain."""
    tasks = sizes[0] * sizes[1] * ((sizes[2] + TILE - 1) // TILE) * ((sizes[3] + TILE - 1) // TILE)
    _tiles(x, out, sizes, s, 0, tasks)


def _layout(node: Node, types: Sequence[TensorType | None]) -> Layout | None:
    assert isinstance(node.attrs, TransposeAttrs)
    shape = shape_of(types[0])
    return collapse_permutation(shape, transpose_perm(node.attrs, len(shape)))


def when_transpose(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    t = types[0] if types else None
    return (
        single_output(node)
        and isinstance(node.attrs, TransposeAttrs)
        and t is not None
        and t.is_concrete
        and np.dtype(t.dtype).itemsize == 4
        and math.prod(shape_of(t)) > 0
        and _layout(node, types) is not None
    )


class Transpose:
    """The collapsed sizes and strides, fixed at plan time; 4-byte elements of any type, copied as
    int32 bit patterns."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        layout = _layout(node, types)
        assert layout is not None and isinstance(node.attrs, TransposeAttrs)
        self.sizes, self.strides = layout
        shape = shape_of(types[0])
        self.shape = tuple(shape[p] for p in transpose_perm(node.attrs, len(shape)))
        self.dtype = np.dtype(types[0].dtype)  # type: ignore[union-attr]
        self.small = is_small(math.prod(shape))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray) -> None:
        """Writes into ``out`` (C-contiguous, the transposed shape; must not overlap ``x``)."""
        source = np.ascontiguousarray(x).reshape(-1).view(np.int32)
        dest = out.reshape(-1).view(np.int32)
        if self.small:
            transpose_tiles_serial(source, dest, self.sizes, self.strides)
        else:
            transpose_tiles(source, dest, self.sizes, self.strides, current_threads())


register("transpose", Transpose, when=when_transpose)
