"""Views (the ops whose output re-reads their input with another shape), Concat, Split and Transpose on a
GPU, device-agnostic: the view step (a reshape of a device tensor shares its memory) and the
plan-time layout of the row copies and the permutation that the backends launch."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.gpu.step import Types, Values, is_float32, shape_of
from edgecnn.ops.common import normalize_axis
from edgecnn.ops.registry import get_op, known_ops
from edgecnn.ops.shape import transpose_perm

VIEW_OPS = tuple(sorted(op for op in known_ops() if get_op(op).view and get_op(op).num_outputs[1] == 1))
"""The single-output view ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity): Dropout, whose
optional mask is a second output, runs elsewhere."""


class ViewStep:
    """Reshape the first input to a shape fixed at plan time, wherever the data lives: a device
    tensor of ``array_type`` is reshaped in place, anything else copied on the host."""

    __slots__ = ("array_type", "device", "shape")

    def __init__(self, device: Any, array_type: type[Any], shape: tuple[int, ...]) -> None:
        self.device = device
        self.array_type = array_type
        self.shape = shape

    def run_device(self, x: Any, *rest: Any) -> Any:
        if isinstance(x, self.array_type):
            return x.reshape(self.shape)
        return self(x)

    def __call__(self, x: Any, *rest: Any) -> np.ndarray:
        return np.array(x, copy=True).reshape(self.shape)


def view_supported(node: Node, types: Types, values: Values) -> bool:
    """The output shape is known at plan time (the shape/axes inputs are constants)."""
    if not is_float32(types[0]):
        return False
    if any(values[i] is None for i in range(1, len(node.inputs)) if node.inputs[i]):
        return False
    (out,) = get_op(node.op).infer(node.attrs, types, values)[:1]
    return out.is_concrete


def view_shape(node: Node, types: Types, values: Values) -> tuple[int, ...]:
    (out,) = get_op(node.op).infer(node.attrs, types, values)[:1]
    return shape_of(out)


class RowCopy(NamedTuple):
    """One tensor of a Concat or Split as rows of ``row`` elements at column ``start`` of the wider
    rows of the other side; ``total`` elements in all."""

    shape: tuple[int, ...]
    total: int
    row: np.int32
    start: np.int32


def concat_supported(node: Node, types: Types, values: Values) -> bool:
    return len(types) >= 1 and all(is_float32(t) for t in types)


def concat_plan(node: Node, types: Types, values: Values) -> tuple[tuple[int, ...], np.int32, list[RowCopy]]:
    """(output shape, its row length, one RowCopy per input)."""
    shapes = [shape_of(t) for t in types]
    axis = normalize_axis(node.attrs.axis, len(shapes[0]))
    (out,) = get_op("Concat").infer(node.attrs, types, values)
    out_shape = shape_of(out)
    return out_shape, np.int32(np.prod(out_shape[axis:])), _row_copies(shapes, axis)


def split_supported(node: Node, types: Types, values: Values) -> bool:
    if not is_float32(types[0]) or (len(types) > 1 and types[1] is not None and values[1] is None):
        return False
    return all(t.is_concrete for t in get_op("Split").infer(node.attrs, types, values))


def split_plan(node: Node, types: Types, values: Values) -> tuple[np.int32, list[RowCopy]]:
    """(the input's row length, one RowCopy per output)."""
    in_shape = shape_of(types[0])
    axis = normalize_axis(node.attrs.axis, len(in_shape))
    shapes = [shape_of(out) for out in get_op("Split").infer(node.attrs, types, values)]
    return np.int32(np.prod(in_shape[axis:])), _row_copies(shapes, axis)


def _row_copies(shapes: list[tuple[int, ...]], axis: int) -> list[RowCopy]:
    copies, start = [], 0
    for shape in shapes:
        row = int(np.prod(shape[axis:]))
        copies.append(RowCopy(shape, int(np.prod(shape)), np.int32(row), np.int32(start)))
        start += row
    return copies


def transpose_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0])


def transpose_plan(node: Node, types: Types) -> tuple[tuple[int, ...], np.ndarray, np.int32]:
    """(output shape, the permute kernel's int32 metadata: output dims then the input strides they
    step, rank) of a Transpose."""
    shape = shape_of(types[0])
    perm = transpose_perm(node.attrs, len(shape))
    strides = [int(np.prod(shape[axis + 1 :])) for axis in range(len(shape))]
    out_shape = tuple(shape[p] for p in perm)
    meta = np.array([*out_shape, *(strides[p] for p in perm)] or [1, 0], np.int32)
    return out_shape, meta, np.int32(max(len(shape), 1))
