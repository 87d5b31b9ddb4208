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
from collections.abc import Callable, Sequence
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
from edgecnn.kernels.cpu.gemm.microkernel import LANES, _vector_pointer
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


INSTRUCTIONS = ("fadd", "fsub", "fmul", "fdiv")
"""LLVM's instruction per entry of OPS."""


def _vector_typer(
    typingctx: Any,
    op: types.Type,
    tail: types.Type,
    out: types.Type,
    out_at: types.Type,
    a: types.Type,
    a_at: types.Type,
    b: types.Type,
    b_at: types.Type,
    count: types.Type,
) -> tuple[Signature, Callable[..., ir.Value]] | None:
    """out[out_at + i] = a[a_at + i] op b[b_at + i] for the LANES values i (``tail``: the first
    ``count`` of them, with masked loads and stores), ``op`` a constant index of OPS; ``a`` or
    ``b`` may be a float32 value instead, taken for every lane (its offset is then ignored). One
    vector instruction per row step where numba's loop vectoriser, with four vectors per
    iteration, left a row shorter than 64 floats (a 7x7 map) to its scalar remainder."""
    if not isinstance(op, types.IntegerLiteral) or not isinstance(tail, types.BooleanLiteral):
        return None
    instruction, masked = INSTRUCTIONS[op.literal_value], bool(tail.literal_value)

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
    ) -> ir.Value:
        vector = ir.VectorType(ir.FloatType(), LANES)
        every_lane = ir.Constant(ir.VectorType(ir.IntType(32), LANES), None)
        word = ir.IntType(32)

        def splat(value: ir.Value, like: ir.VectorType) -> ir.Value:
            single = builder.insert_element(ir.Constant(like, None), value, ir.Constant(word, 0))
            return builder.shuffle_vector(single, single, every_lane)

        lane = ir.VectorType(args[8].type, LANES)
        mask = builder.icmp_unsigned("<", ir.Constant(lane, list(range(LANES))), splat(args[8], lane))

        def pointer(kind: types.Type, value: ir.Value, at: ir.Value) -> ir.Value:
            data = context.make_array(kind)(context, builder, value).data
            return _vector_pointer(builder, data, at, vector)

        def operand(kind: types.Type, value: ir.Value, at: ir.Value) -> ir.Value:
            if not isinstance(kind, types.Array):
                return splat(value, vector)
            at_vector = pointer(kind, value, at)
            if not masked:
                return builder.load(at_vector, align=4)
            load = cgutils.get_or_insert_function(
                builder.module,
                ir.FunctionType(vector, [at_vector.type, word, mask.type, vector]),
                f"llvm.masked.load.v{LANES}f32.p0",
            )
            return builder.call(load, [at_vector, ir.Constant(word, 4), mask, ir.Constant(vector, None)])

        x = operand(sig.args[4], args[4], args[5])
        y = operand(sig.args[6], args[6], args[7])
        result = getattr(builder, instruction)(x, y)
        target = pointer(sig.args[2], args[2], args[3])
        if masked:
            store = cgutils.get_or_insert_function(
                builder.module,
                ir.FunctionType(ir.VoidType(), [vector, target.type, word, mask.type]),
                f"llvm.masked.store.v{LANES}f32.p0",
            )
            builder.call(store, [result, target, ir.Constant(word, 4), mask])
        else:
            builder.store(result, target, align=4)
        return context.get_dummy_value()

    return types.void(op, tail, out, out_at, a, a_at, b, b_at, count), codegen


vector_op = cast("Callable[..., None]", intrinsic(_vector_typer))


@numba.njit(inline="always", cache=True, error_model="numpy")
def _span(
    op: int, out: np.ndarray, to: np.uint64, a: Any, at: np.uint64, b: Any, bt: np.uint64, count: np.uint64
) -> None:
    """out[to + i] = a[at + i] op b[bt + i] for i < count (``op`` a constant; ``a`` or ``b`` may be
    a float32 value): whole vectors, then one masked vector for the rest."""
    full = count - count % np.uint64(LANES)
    for j in range(np.uint64(0), full, np.uint64(LANES)):
        vector_op(op, False, out, to + j, a, at + j, b, bt + j, count)
    if full < count:
        vector_op(op, True, out, to + full, a, at + full, b, bt + full, count - full)


@numba.njit(inline="always", cache=True, error_model="numpy")
def _form_rows(
    op: int,
    form: int,
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
    """Rows [first, end) of the (outer * middle, inner) output, ``op`` and ``form`` constants: both
    inputs advance along the row (form 0), only a (1), only b (2), neither (3: one value). The
    row's outer and middle indices are counted, not divided out of its number."""
    count = np.uint64(inner)
    i0 = first // middle
    i1 = first - i0 * middle
    for r in range(first, end):
        ao = np.uint64(i0 * sa[0] + i1 * sa[1])
        bo = np.uint64(i0 * sb[0] + i1 * sb[1])
        to = np.uint64(r) * count
        if form == 0:
            _span(op, out, to, a, ao, b, bo, count)
        elif form == 1:
            _span(op, out, to, a, ao, b[bo], bo, count)
        elif form == 2:
            _span(op, out, to, a[ao], ao, b, bo, count)
        else:
            _span(op, out, to, a[ao], ao, b[bo], bo, np.uint64(1))
            out[to + 1 : to + count] = out[to]
        i1 += 1
        if i1 == middle:
            i0, i1 = i0 + 1, 0


@numba.njit(inline="always", cache=True, error_model="numpy")
def _op_rows(
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
    """``_form_rows`` with the inputs' form made a constant, one branch per call: a branch per row
    kept numba from pairing each row's reference counting of the arrays and left two calls of its
    runtime per row, as costly as a 7x7 gate's row."""
    if sa[2] == 1 and sb[2] == 1:
        _form_rows(op, 0, a, sa, b, sb, out, middle, inner, first, end)
    elif sa[2] == 1:
        _form_rows(op, 1, a, sa, b, sb, out, middle, inner, first, end)
    elif sb[2] == 1:
        _form_rows(op, 2, a, sa, b, sb, out, middle, inner, first, end)
    else:
        _form_rows(op, 3, a, sa, b, sb, out, middle, inner, first, end)


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
    """``_op_rows`` with the op made a constant, one branch per call."""
    if op == 0:
        _op_rows(0, a, sa, b, sb, out, middle, inner, first, end)
    elif op == 1:
        _op_rows(1, a, sa, b, sb, out, middle, inner, first, end)
    elif op == 2:
        _op_rows(2, a, sa, b, sb, out, middle, inner, first, end)
    else:
        _op_rows(3, a, sa, b, sb, out, middle, inner, first, end)


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
