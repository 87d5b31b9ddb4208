"""Compiled 8-bit QLinearAdd, QLinearConcat and QLinearLeakyRelu: the residual Add, the Concat and
the activations of an int8 network computed on the 8-bit tensors, with the float32 arithmetic of
edgecnn.ops.quant's references.

QLinearAdd runs on inputs of the output's shape (no broadcasting; other shapes run the reference).
QLinearConcat maps each input whose parameters differ from the output's through a 256-entry table
of Q(DQ(x)) built at plan time, and copies the others; QLinearLeakyRelu maps every element through
the table its reference computes for the 256 codes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.int8.loops import add_span
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.threads import call, is_small
from edgecnn.ops.common import normalize_axis
from edgecnn.ops.quant import QUANT_DTYPES, add_parameters, requantized
from edgecnn.ops.registry import get_op

CHUNK = 16384
"""Elements per parallel task."""


def concrete_8bit(t: TensorType | None) -> bool:
    """An int8/uint8 tensor of known, non-empty shape."""
    return t is not None and t.dtype in QUANT_DTYPES and t.is_concrete and all(d > 0 for d in t.dims)


def scalar_constants(values: Sequence[np.ndarray | None], indices: Sequence[int]) -> bool:
    """Inputs ``indices`` are constants of one value each (per-tensor parameters)."""
    found = [values[i] if i < len(values) else None for i in indices]
    return all(v is not None and v.size == 1 for v in found)


AddConstants = tuple[np.float32, np.float32, np.float32, np.float32, np.float32]
"""QLinearAdd's (ratio_a, ratio_b, fixed, low, high) as the compiled loop takes them (loops.add_span)."""


def add_constants(
    a_scale: np.ndarray,
    a_zp: np.ndarray,
    b_scale: np.ndarray,
    b_zp: np.ndarray,
    y_scale: np.ndarray,
    y_zp: np.ndarray,
    relu: bool,
) -> AddConstants:
    """The constants of QLinearAdd(a, b) -> y (clamped at y's zero point where ``relu``), computed
    as the reference does (ops.quant.add_parameters)."""
    ratio_a, ratio_b, fixed = add_parameters(a_scale, a_zp, b_scale, b_zp, y_scale, y_zp)
    info = np.iinfo(y_zp.dtype)
    low = int(y_zp.reshape(())) if relu else int(info.min)
    return np.float32(ratio_a), np.float32(ratio_b), np.float32(fixed), np.float32(low), np.float32(info.max)


NO_ADD: AddConstants = (np.float32(0.0),) * 5
"""The constants passed where no Add is applied."""


@numba.njit(parallel=True, cache=True, nogil=True)
def qlinear_add_into(a: np.ndarray, b: np.ndarray, constants: tuple, out: np.ndarray) -> None:
    """out = QLinearAdd(a, b) over flat arrays (loops.add_span), in parallel chunks."""
    ratio_a, ratio_b, fixed, low, high = constants
    n = a.shape[0]
    for block in numba.prange((n + CHUNK - 1) // CHUNK):
        start = block * CHUNK
        add_span(a, b, ratio_a, ratio_b, fixed, low, high, out, start, min(n, start + CHUNK) - start)


def when_add(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    a, b = types[0] if types else None, types[3] if len(types) > 3 else None
    if not (concrete_8bit(a) and concrete_8bit(b) and len(node.outputs) == 1):
        return False
    assert a is not None and b is not None
    return a.dims == b.dims and a.dtype == b.dtype and scalar_constants(values, (1, 2, 4, 5, 6, 7))


class QLinearAddKernel:
    """Elementwise 8-bit add of two tensors of one shape, requantised, optionally clamped at y_zp."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        a_scale, a_zp, b_scale, b_zp, y_scale, y_zp = (
            values[1],
            values[2],
            values[4],
            values[5],
            values[6],
            values[7],
        )
        assert a_scale is not None and a_zp is not None and b_scale is not None and b_zp is not None
        assert y_scale is not None and y_zp is not None
        relu = node.attrs.activation == "relu"
        self.constants = add_constants(a_scale, a_zp, b_scale, b_zp, y_scale, y_zp, relu)
        a_type = types[0]
        assert a_type is not None
        self.shape, self.dtype = a_type.dims, y_zp.dtype
        self.small = is_small(int(np.prod(self.shape)))

    def __call__(self, a: np.ndarray, *rest: np.ndarray) -> np.ndarray:
        out = np.empty(self.shape, dtype=self.dtype)
        self.run_into(out, a, *rest)
        return out

    def run_into(self, out: np.ndarray, a: np.ndarray, *rest: np.ndarray) -> None:
        """Writes into ``out`` (C-contiguous, the inputs' shape and type)."""
        b = rest[2]
        flat_a, flat_b = np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)
        call(qlinear_add_into, self.small, flat_a, flat_b, self.constants, out.reshape(-1))


@numba.njit(nogil=True, cache=True)
def _lookup_span(
    x: np.ndarray, table: np.ndarray, out: np.ndarray, source: int, target: int, count: int
) -> None:
    """out[target + i] = table[bit pattern of x[source + i]] for i < count (flat arrays; unsigned
    offsets: no negative-index checks in the loop)."""
    s, t = np.uint64(source), np.uint64(target)
    for i in range(np.uint64(count)):
        out[t + i] = table[np.uint64(np.int32(x[s + i]) & 255)]


@numba.njit(parallel=True, cache=True, nogil=True)
def concat_rows_into(part: np.ndarray, table: np.ndarray, mapped: bool, start: int, out: np.ndarray) -> None:
    """out[:, start:start + part.shape[1]] = table[part] (or part): one input of a Concat, its
    (outer, length) rows placed in the (outer, whole) output."""
    rows, length = part.shape
    whole = out.shape[1]
    flat_part, flat_out = part.reshape(-1), out.reshape(-1)
    for r in numba.prange(rows):
        if mapped:
            _lookup_span(flat_part, table, flat_out, r * length, r * whole + start, length)
        else:
            out[r, start : start + length] = part[r]


def when_concat(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    parts = list(types[2::3])
    if len(node.outputs) != 1 or not parts or not all(concrete_8bit(t) for t in parts):
        return False
    triples = [i for k in range(2, len(types), 3) for i in (k + 1, k + 2)]
    return scalar_constants(values, (0, 1, *triples))


class QLinearConcatKernel:
    """Each input requantised to the output's parameters through a table (or copied) into its slab."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        y_scale, y_zp = values[0], values[1]
        assert y_scale is not None and y_zp is not None
        parts = [t.dims for t in types[2::3] if t is not None]
        axis = normalize_axis(node.attrs.axis, len(parts[0]))
        self.dtype = y_zp.dtype
        self.outer = int(np.prod(parts[0][:axis]))
        self.lengths = [int(np.prod(shape[axis:])) for shape in parts]
        self.starts = [sum(self.lengths[:i]) for i in range(len(parts))]
        self.shape = (*parts[0][:axis], sum(shape[axis] for shape in parts), *parts[0][axis + 1 :])
        codes = code_table(self.dtype)
        self.tables: list[np.ndarray] = []
        self.mapped: list[bool] = []
        for k in range(2, len(values), 3):
            x_scale, x_zp = values[k + 1], values[k + 2]
            assert x_scale is not None and x_zp is not None
            table = requantized(codes, x_scale, x_zp, y_scale, y_zp)
            self.mapped.append(table is not codes)
            self.tables.append(np.ascontiguousarray(table, dtype=self.dtype))
        self.small = is_small(self.outer * sum(self.lengths))

    def __call__(self, *inputs: np.ndarray) -> np.ndarray:
        out = np.empty(self.shape, dtype=self.dtype)
        self.run_into(out, *inputs)
        return out

    def run_into(self, out: np.ndarray, *inputs: np.ndarray) -> None:
        """Writes into ``out`` (C-contiguous, the concatenated shape; must not overlap an input)."""
        rows = out.reshape(self.outer, -1)
        for i, part in enumerate(inputs[2::3]):
            flat = np.ascontiguousarray(part).reshape(self.outer, self.lengths[i])
            call(concat_rows_into, self.small, flat, self.tables[i], self.mapped[i], self.starts[i], rows)


def code_table(dtype: np.dtype) -> np.ndarray:
    """The 256 values of an 8-bit type, each at the index of its bit pattern."""
    return np.arange(256, dtype=np.uint8).view(dtype)


@numba.njit(parallel=True, cache=True, nogil=True)
def lookup_into(x: np.ndarray, table: np.ndarray, out: np.ndarray) -> None:
    """out[i] = table[bit pattern of x[i]] over flat arrays."""
    n = x.shape[0]
    for block in numba.prange((n + CHUNK - 1) // CHUNK):
        start = block * CHUNK
        _lookup_span(x, table, out, start, start, min(n, start + CHUNK) - start)


def when_table(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    return (
        bool(types)
        and concrete_8bit(types[0])
        and len(node.outputs) == 1
        and scalar_constants(values, (1, 2, 3, 4))
    )


class QLinearTableKernel:
    """An elementwise 8-bit op as a 256-entry table: its reference applied to every code once."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        x = types[0]
        assert x is not None
        self.shape, self.dtype = x.dims, np.dtype(x.dtype)
        self.table = np.ascontiguousarray(
            get_op(node.op).reference(node.attrs, code_table(self.dtype), *values[1:])
        )
        self.small = is_small(int(np.prod(self.shape)))

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.shape, dtype=self.dtype)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, x's shape and type)."""
        call(lookup_into, self.small, np.ascontiguousarray(x).reshape(-1), self.table, out.reshape(-1))


register("int8_add", QLinearAddKernel, when=when_add)
register("int8_concat", QLinearConcatKernel, when=when_concat)
register("int8_table", QLinearTableKernel, when=when_table)

__all__ = ["QLinearAddKernel", "QLinearConcatKernel", "QLinearTableKernel"]
