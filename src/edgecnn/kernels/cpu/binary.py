"""Add, Sub, Mul and Div of float32 tensors with numpy broadcasting on the CPU, in one compiled pass:
a squeeze-and-excitation gate (an (N, C, H, W) map times its (N, C, 1, 1) scales), a layer scale
over the last axis, a constant offset or divisor. The reference's ufunc with ``out=`` is as fast on
a large map but pays numpy's fixed cost per call on the small ones, and runs on one thread.

At plan time both inputs' broadcast strides (0 along a broadcast axis) are collapsed with the
output's shape: axes of size 1 dropped, neighbours merged where both inputs step through them as
one, so that every broadcast these networks use becomes at most three loops, the innermost running
at unit or zero stride for each input. Four axes that cannot merge decline the node (the reference
runs it). The arithmetic is float32 IEEE, as numpy's: x / 0 is inf or NaN, never an error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import is_float32, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import current_threads, is_small, worker_share

OPS = {"Add": 0, "Sub": 1, "Mul": 2, "Div": 3}
"""The code compiled code branches on, per op."""

Strides = tuple[int, int, int]


def element_strides(shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    """A C-contiguous input of ``shape``'s step per axis of ``out`` (0 where it is broadcast)."""
    padded = (1,) * (len(out) - len(shape)) + shape
    strides, step = [], 1
    for size in reversed(padded):
        strides.append(step if size != 1 else 0)
        step *= size
    return tuple(reversed(strides))


def collapse(
    out: tuple[int, ...], a: tuple[int, ...], b: tuple[int, ...]
) -> tuple[tuple[int, int, int], Strides, Strides] | None:
    """(the output as three sizes, a's and b's element strides along them), or None when the
    broadcast needs more than three loops. Sizes and strides are padded in front with (1, 0)."""
    sa, sb = element_strides(a, out), element_strides(b, out)
    axes = [(n, x, y) for n, x, y in zip(out, sa, sb) if n != 1]
    merged: list[tuple[int, int, int]] = []
    for n, x, y in axes:
        if merged:
            pn, px, py = merged[-1]
            if px == x * n and py == y * n:  # both inputs step through the two axes as one
                merged[-1] = (pn * n, x, y)
                continue
        merged.append((n, x, y))
    if len(merged) > 3:
        return None
    merged = [(1, 0, 0)] * (3 - len(merged)) + merged
    sizes = (merged[0][0], merged[1][0], merged[2][0])
    return (
        sizes,
        (merged[0][1], merged[1][1], merged[2][1]),
        (merged[0][2], merged[1][2], merged[2][2]),
    )


@numba.njit(inline="always", cache=True, error_model="numpy")
def _both(op: int, x: np.ndarray, y: np.ndarray, o: np.ndarray) -> None:
    """o = x op y over one row; a loop per op, so that each compiles to vector code."""
    if op == 0:
        for i in range(o.shape[0]):
            o[i] = x[i] + y[i]
    elif op == 1:
        for i in range(o.shape[0]):
            o[i] = x[i] - y[i]
    elif op == 2:
        for i in range(o.shape[0]):
            o[i] = x[i] * y[i]
    else:
        for i in range(o.shape[0]):
            o[i] = x[i] / y[i]


@numba.njit(inline="always", cache=True, error_model="numpy")
def _right(op: int, x: np.ndarray, v: np.float32, o: np.ndarray) -> None:
    """o = x op v over one row."""
    if op == 0:
        for i in range(o.shape[0]):
            o[i] = x[i] + v
    elif op == 1:
        for i in range(o.shape[0]):
            o[i] = x[i] - v
    elif op == 2:
        for i in range(o.shape[0]):
            o[i] = x[i] * v
    else:
        for i in range(o.shape[0]):
            o[i] = x[i] / v


@numba.njit(inline="always", cache=True, error_model="numpy")
def _left(op: int, v: np.float32, y: np.ndarray, o: np.ndarray) -> None:
    """o = v op y over one row."""
    if op == 0:
        for i in range(o.shape[0]):
            o[i] = v + y[i]
    elif op == 1:
        for i in range(o.shape[0]):
            o[i] = v - y[i]
    elif op == 2:
        for i in range(o.shape[0]):
            o[i] = v * y[i]
    else:
        for i in range(o.shape[0]):
            o[i] = v / y[i]


@numba.njit(inline="always", cache=True, error_model="numpy")
def _rows(
    op: int,
    a: np.ndarray,
    sa: tuple[int, int, int],
    b: np.ndarray,
    sb: tuple[int, int, int],
    out: np.ndarray,
    middle: int,
    inner: int,
    first: int,
    end: int,
) -> None:
    """Rows [first, end) of the (outer * middle, inner) output; a row's inputs advance by their
    innermost stride (1, or 0 for a broadcast value), a branch taken once per row."""
    for r in range(first, end):
        i0 = r // middle
        i1 = r - i0 * middle
        ao = i0 * sa[0] + i1 * sa[1]
        bo = i0 * sb[0] + i1 * sb[1]
        o = out[r * inner : (r + 1) * inner]
        if sa[2] == 1 and sb[2] == 1:
            _both(op, a[ao : ao + inner], b[bo : bo + inner], o)
        elif sa[2] == 1:
            _right(op, a[ao : ao + inner], b[bo], o)
        elif sb[2] == 1:
            _left(op, a[ao], b[bo : bo + inner], o)
        else:
            _right(op, a[ao : ao + 1], b[bo], o[:1])
            o[1:] = o[0]


@numba.njit(parallel=True, nogil=True, cache=True, error_model="numpy")
def binary_rows(
    op: int,
    a: np.ndarray,
    sa: tuple[int, int, int],
    b: np.ndarray,
    sb: tuple[int, int, int],
    out: np.ndarray,
    sizes: tuple[int, int, int],
    workers: int,
) -> None:
    """out = a op b over flat float32 arrays, the rows shared out among ``workers`` threads."""
    rows = sizes[0] * sizes[1]
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, rows)
        _rows(op, a, sa, b, sb, out, sizes[1], sizes[2], first, end)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def binary_rows_serial(
    op: int,
    a: np.ndarray,
    sa: tuple[int, int, int],
    b: np.ndarray,
    sb: tuple[int, int, int],
    out: np.ndarray,
    sizes: tuple[int, int, int],
) -> None:
    """``binary_rows`` on the calling thread, for tensors below the thread grain."""
    _rows(op, a, sa, b, sb, out, sizes[1], sizes[2], 0, sizes[0] * sizes[1])


def _layout(types: Sequence[TensorType | None]) -> tuple[tuple[int, int, int], Strides, Strides] | None:
    a, b = shape_of(types[0]), shape_of(types[1])
    out = np.broadcast_shapes(a, b)
    return collapse(tuple(out), a, b)


def when_binary(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    return (
        node.op in OPS
        and single_output(node)
        and len(types) == 2
        and is_float32(types[0])
        and is_float32(types[1])
        and _layout(types) is not None
    )


class Binary:
    """The collapsed loop sizes and strides, fixed at plan time; ``out`` may be an input of the
    output's own shape (read at the index it is written)."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        layout = _layout(types)
        assert layout is not None
        self.sizes, self.sa, self.sb = layout
        self.op = OPS[node.op]
        self.shape = tuple(np.broadcast_shapes(shape_of(types[0]), shape_of(types[1])))
        self.in_place = tuple(i for i in (0, 1) if shape_of(types[i]) == self.shape)
        self.small = is_small(math.prod(self.shape))

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = np.empty(self.shape, np.float32)
        self.run_into(out, a, b)
        return out

    def run_into(self, out: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
        """Writes into ``out`` (C-contiguous, the broadcast shape)."""
        x = np.ascontiguousarray(a).reshape(-1)
        y = np.ascontiguousarray(b).reshape(-1)
        flat = out.reshape(-1)
        if self.small:
            binary_rows_serial(self.op, x, self.sa, y, self.sb, flat, self.sizes)
        else:
            binary_rows(self.op, x, self.sa, y, self.sb, flat, self.sizes, current_threads())


register("binary", Binary, when=when_binary)
