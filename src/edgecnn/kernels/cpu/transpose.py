"""Transpose on the CPU: any permutation of up to six axes of 4-byte elements (float32, int32).

At plan time the permutation is simplified: axes of size 1 are dropped and input axes that stay
neighbours in the output are merged, so NCHW -> NHWC becomes a (C, HW) -> (HW, C) matrix transpose
and a channel shuffle (N, g, C/g, H, W) -> (N, C/g, g, H, W) becomes a copy of HW-element rows.
What is left runs one of three loops on numba's threads:

- ``copy``: nothing moves (the permutation only reorders size-1 axes): one flat copy;
- ``rows``: the innermost axis stays innermost: contiguous rows copied (memcpy) to their places;
- ``tiles``: the innermost axis moves: 8x8 tiles between the input's inner axis and the axis that
  becomes the output's inner one, each read as eight 8-lane vectors, transposed in registers by
  three rounds of shuffles and stored as eight vectors, so that reads and writes both stream; for
  every combination of the (at most four) other axes. Numpy's strided copy reads or writes one
  element at a time, which the scalar loops of an earlier attempt could not beat.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.base import BaseContext
from numba.core.typing import Signature
from numba.extending import intrinsic

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import shape_of
from edgecnn.kernels.cpu.system.threads import call, current_threads, is_small, worker_share
from edgecnn.ops.shape import TransposeAttrs, transpose_perm

MAX_RANK = 6
TILE = 8
"""Elements per side of a tile: one 8-lane vector of 4-byte elements (two SSE/NEON registers)."""

BAND = 2 * TILE
"""Rows per task: 16 4-byte elements fill the 64-byte lines each task writes."""

OUTER = MAX_RANK - 1
"""Axes besides those a loop spans, padded with axes of size 1."""


def simplify(shape: Sequence[int], perm: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(input shape, permutation) with size-1 axes dropped and input axes that stay adjacent and in
    order in the output merged into one: the same data movement in the fewest axes."""
    kept = [axis for axis in range(len(shape)) if shape[axis] != 1]
    rank = {axis: i for i, axis in enumerate(kept)}
    order = [rank[axis] for axis in perm if axis in rank]  # kept input axes in output order
    groups: list[list[int]] = []
    for axis in order:
        if groups and groups[-1][-1] + 1 == axis:
            groups[-1].append(axis)
        else:
            groups.append([axis])
    by_input = sorted(range(len(groups)), key=lambda g: groups[g][0])
    dims = tuple(math.prod(shape[kept[a]] for a in groups[g]) for g in by_input)
    position = {g: i for i, g in enumerate(by_input)}
    return dims, tuple(position[g] for g in range(len(groups)))


def c_strides(dims: Sequence[int]) -> list[int]:
    """Element strides of a C-contiguous array of these dimensions."""
    strides, step = [], 1
    for d in reversed(dims):
        strides.append(step)
        step *= d
    return strides[::-1]


def _swap_masks(k: int) -> tuple[list[int], list[int]]:
    """Shuffle masks over two rows (a, b) = rows i and i + k that swap the k x k blocks off the
    diagonal of each 2k x 2k block: three rounds (k = 4, 2, 1) transpose an 8 x 8 tile."""
    low = [j if j & k == 0 else TILE + j - k for j in range(TILE)]
    high = [j + k if j & k == 0 else TILE + j for j in range(TILE)]
    return low, high


def _tile_codegen(
    context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
) -> ir.Value:
    x_v, x_off, x_stride, out_v, out_off, out_stride = args
    vector = ir.VectorType(ir.IntType(32), TILE)
    x_ptr = context.make_array(sig.args[0])(context, builder, x_v).data
    out_ptr = context.make_array(sig.args[3])(context, builder, out_v).data

    def address(base: ir.Value, offset: ir.Value, stride: ir.Value, i: int) -> ir.Value:
        at = builder.add(offset, builder.mul(stride, ir.Constant(stride.type, i)))
        return builder.bitcast(builder.gep(base, [at]), vector.as_pointer())

    rows = [builder.load(address(x_ptr, x_off, x_stride, r), align=4) for r in range(TILE)]
    k = TILE // 2
    while k:
        low, high = (ir.Constant(vector, mask) for mask in _swap_masks(k))
        swapped = list(rows)
        for i in (i for i in range(TILE) if not i & k):
            swapped[i] = builder.shuffle_vector(rows[i], rows[i + k], low)
            swapped[i + k] = builder.shuffle_vector(rows[i], rows[i + k], high)
        rows = swapped
        k //= 2
    for c, column in enumerate(rows):
        builder.store(column, address(out_ptr, out_off, out_stride, c), align=4)
    return context.get_dummy_value()


def _tile_typer(
    typingctx: Any, x: Any, x_off: Any, x_stride: Any, out: Any, out_off: Any, out_stride: Any
) -> tuple[Signature, Any]:
    return types.void(x, x_off, x_stride, out, out_off, out_stride), _tile_codegen


def _copy_codegen(
    context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
) -> ir.Value:
    x_v, x_off, out_v, out_off, count = args
    x_ptr = context.make_array(sig.args[0])(context, builder, x_v).data
    out_ptr = context.make_array(sig.args[2])(context, builder, out_v).data
    item = ir.Constant(count.type, 4)
    cgutils.raw_memcpy(builder, builder.gep(out_ptr, [out_off]), builder.gep(x_ptr, [x_off]), count, item, 4)
    return context.get_dummy_value()


def _copy_typer(
    typingctx: Any, x: Any, x_off: Any, out: Any, out_off: Any, count: Any
) -> tuple[Signature, Any]:
    return types.void(x, x_off, out, out_off, count), _copy_codegen


tile = cast("Any", intrinsic(_tile_typer))
"""tile(x, x_off, x_stride, out, out_off, out_stride): out[out_off + c*out_stride + r] =
x[x_off + r*x_stride + c] for r, c < TILE, on 1-D arrays of 4-byte elements (moved as int32)."""

copy_run = cast("Any", intrinsic(_copy_typer))
"""copy_run(x, x_off, out, out_off, count): ``count`` 4-byte elements, as one memcpy."""


@numba.njit(inline="always", cache=True)
def _offsets(
    index: int, sizes: np.ndarray, in_strides: np.ndarray, out_strides: np.ndarray
) -> tuple[int, int]:
    """The input and output offsets of the ``index``-th combination of the outer axes (last fastest)."""
    source = 0
    dest = 0
    for k in range(sizes.shape[0] - 1, -1, -1):
        i = index % sizes[k]
        index //= sizes[k]
        source += i * in_strides[k]
        dest += i * out_strides[k]
    return source, dest


@numba.njit(parallel=True, nogil=True, cache=True)
def copy_flat(x: np.ndarray, out: np.ndarray, workers: int) -> None:
    """out[:] = x[:] for flat arrays, in one contiguous share per worker."""
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, x.shape[0])
        copy_run(x, first, out, first, end - first)


@numba.njit(inline="always", cache=True)
def _copy_rows(
    x: np.ndarray,
    out: np.ndarray,
    length: int,
    sizes: np.ndarray,
    in_strides: np.ndarray,
    out_strides: np.ndarray,
    first: int,
    end: int,
) -> None:
    """Rows [first, end): the first row's offsets by division, the next ones by counting (the last
    outer axis fastest, carrying into the ones before)."""
    if first >= end:
        return
    index = np.empty(sizes.shape[0], np.int64)
    rest = first
    for k in range(sizes.shape[0] - 1, -1, -1):
        index[k] = rest % sizes[k]
        rest //= sizes[k]
    source, dest = _offsets(first, sizes, in_strides, out_strides)
    for _ in range(first, end):
        copy_run(x, source, out, dest, length)
        k = sizes.shape[0] - 1
        index[k] += 1
        source += in_strides[k]
        dest += out_strides[k]
        while k > 0 and index[k] == sizes[k]:
            source -= sizes[k] * in_strides[k]
            dest -= sizes[k] * out_strides[k]
            index[k] = 0
            k -= 1
            index[k] += 1
            source += in_strides[k]
            dest += out_strides[k]


@numba.njit(parallel=True, nogil=True, cache=True)
def copy_rows(
    x: np.ndarray,
    out: np.ndarray,
    length: int,
    sizes: np.ndarray,
    in_strides: np.ndarray,
    out_strides: np.ndarray,
    workers: int,
) -> None:
    """Each combination of the outer axes (``sizes``) is a row of ``length`` contiguous elements at
    its input offset, copied to its output offset; rows shared among workers."""
    rows = 1
    for s in sizes:
        rows *= s
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, rows)
        _copy_rows(x, out, length, sizes, in_strides, out_strides, first, end)


@numba.njit(nogil=True, cache=True)
def copy_rows_serial(
    x: np.ndarray,
    out: np.ndarray,
    length: int,
    sizes: np.ndarray,
    in_strides: np.ndarray,
    out_strides: np.ndarray,
) -> None:
    """``copy_rows`` on the calling thread, for copies below the thread grain."""
    rows = 1
    for s in sizes:
        rows *= s
    _copy_rows(x, out, length, sizes, in_strides, out_strides, 0, rows)


@numba.njit(inline="always", cache=True)
def _scalar(
    x: np.ndarray,
    out: np.ndarray,
    source: int,
    dest: int,
    rs: int,
    cs: int,
    r0: int,
    r1: int,
    c0: int,
    c1: int,
) -> None:
    for c in range(c0, c1):
        for r in range(r0, r1):
            out[dest + c * cs + r] = x[source + r * rs + c]


@numba.njit(parallel=True, nogil=True, cache=True)
def copy_tiles(
    x: np.ndarray,
    out: np.ndarray,
    rows: int,
    columns: int,
    row_stride: int,
    column_stride: int,
    sizes: np.ndarray,
    in_strides: np.ndarray,
    out_strides: np.ndarray,
    workers: int,
) -> None:
    """out[o + c * column_stride + r] = x[i + r * row_stride + c] for r < rows, c < columns, at each
    outer combination's offsets (i, o): a matrix transpose per combination, in vector tiles where
    a whole tile fits and element by element at the edges. Tasks are (combination, band of BAND
    rows), shared among workers in contiguous runs."""
    outer = 1
    for s in sizes:
        outer *= s
    bands = (rows + BAND - 1) // BAND
    full_columns = columns - columns % TILE
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, outer * bands)
        for task in range(first, end):
            source, dest = _offsets(task // bands, sizes, in_strides, out_strides)
            r0 = (task % bands) * BAND
            r1 = min(r0 + BAND, rows)
            full_rows = r0 + (r1 - r0) // TILE * TILE
            for c0 in range(0, full_columns, TILE):
                for r in range(r0, full_rows, TILE):
                    tile(
                        x,
                        source + r * row_stride + c0,
                        row_stride,
                        out,
                        dest + c0 * column_stride + r,
                        column_stride,
                    )
            _scalar(x, out, source, dest, row_stride, column_stride, full_rows, r1, 0, columns)
            _scalar(x, out, source, dest, row_stride, column_stride, r0, full_rows, full_columns, columns)


def _padded(values: Sequence[int], fill: int) -> np.ndarray:
    return np.array([fill] * (OUTER - len(values)) + list(values), dtype=np.int64)


def when_transpose(
    node: Node, in_types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    x = in_types[0] if in_types else None
    if x is None or not x.is_concrete or not isinstance(node.attrs, TransposeAttrs):
        return False
    return 0 < len(x.dims) <= MAX_RANK and np.dtype(x.dtype).itemsize == 4 and math.prod(x.dims) > 0


class Transpose:
    """The simplified permutation's loop and its arguments, fixed at plan time."""

    def __init__(
        self, node: Node, in_types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
    ):
        x = in_types[0]
        assert x is not None
        shape = shape_of(x)
        perm = transpose_perm(node.attrs, len(shape))
        self.out_shape = tuple(shape[p] for p in perm)
        self.dtype = np.dtype(x.dtype)
        self.small = is_small(math.prod(shape))
        dims, order = simplify(shape, perm)
        strides = c_strides(dims)
        out_strides = dict(zip(order, c_strides([dims[a] for a in order])))  # input axis -> output stride
        self.kind = "copy"
        self.args: tuple[Any, ...] = ()
        if len(dims) > 1 and order[-1] == len(dims) - 1:
            self.kind = "rows"
            outer = list(order[:-1])
            self.args = (
                dims[-1],
                _padded([dims[a] for a in outer], 1),
                _padded([strides[a] for a in outer], 0),
                _padded([out_strides[a] for a in outer], 0),
            )
        elif len(dims) > 1:
            self.kind = "tiles"
            inner, moved = len(dims) - 1, order[-1]  # input's inner axis; the output's inner axis
            outer = [a for a in range(len(dims)) if a not in (inner, moved)]
            self.args = (
                dims[moved],
                dims[inner],
                strides[moved],
                out_strides[inner],
                _padded([dims[a] for a in outer], 1),
                _padded([strides[a] for a in outer], 0),
                _padded([out_strides[a] for a in outer], 0),
            )

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.out_shape, self.dtype)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the permuted shape; must not overlap ``x``)."""
        source, dest = x.reshape(-1), out.reshape(-1)  # x's copy if it is not contiguous
        if self.kind == "rows" and self.small:
            copy_rows_serial(source, dest, *self.args)
        elif self.kind == "rows":
            length, sizes, in_strides, out_strides = self.args
            copy_rows(source, dest, length, sizes, in_strides, out_strides, current_threads())
        else:
            loop = copy_tiles if self.kind == "tiles" else copy_flat
            call(loop, self.small, source, dest, *self.args, 1 if self.small else current_threads())


register("transpose", Transpose, when=when_transpose)
