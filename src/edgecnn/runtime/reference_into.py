"""``run_into`` for the reference kernels where numpy can write the result in place of returning
it (a ufunc's ``out=``, ``np.concatenate(out=)``, ``np.copyto`` from a strided view), so that the
steps the compiled kernels do not cover (residual Add, Concat, ShuffleNet's Transpose and Split,
small ReLUs, Softmax) also run without allocating their output (Softmax still allocates its
per-row max and sum). Every other reference step allocates its result.

Each adapter has the reference's meaning for the types the plan checked (same dtypes, output
shape = the broadcast shape); ``in_place`` lists the inputs an adapter may be given as its output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.ops.activation import SoftmaxAttrs, softmax_axes
from edgecnn.ops.common import normalize_axis
from edgecnn.ops.registry import find_op
from edgecnn.ops.shape import ConcatAttrs, SplitAttrs, TransposeAttrs, transpose_perm

IntoFn = Callable[..., None]

_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}


@dataclass(frozen=True)
class Adapter:
    run_into: IntoFn
    in_place: tuple[int, ...] = ()


def _concrete(t: TensorType | None) -> TypeGuard[TensorType]:
    return t is not None and t.is_concrete


def _is_float(t: TensorType | None) -> bool:
    return t is not None and np.dtype(t.dtype).kind == "f"


def _rank(t: TensorType | None) -> int:
    """The rank of a type the caller checked is concrete."""
    assert t is not None
    return len(t.dims)


def is_view_step(
    node: Node, in_types: Sequence[TensorType | None], out_types: Sequence[TensorType | None]
) -> bool:
    """The step only re-reads its first input with the output's shape (no data changes): its op
    declares ``view`` and no other output (Dropout's mask) is used."""
    definition = find_op(node.op)
    if definition is None or not definition.view or not in_types or not out_types or not node.outputs[0]:
        return False
    if any(node.outputs[1:]):
        return False  # another output is data of its own
    x, y = in_types[0], out_types[0]
    if not (_concrete(x) and _concrete(y)) or x.dtype != y.dtype:
        return False
    return int(np.prod(x.dims)) == int(np.prod(y.dims))


def reference_adapter(
    node: Node, in_types: Sequence[TensorType | None], out_types: Sequence[TensorType | None]
) -> Adapter | None:
    """A write-into form of the op's reference kernel for these types, or None."""
    if not all(_concrete(t) for t in out_types) or not all(_concrete(t) for t in in_types if t is not None):
        return None
    dtypes = {t.dtype for t in (*in_types, *out_types) if t is not None}
    out0 = out_types[0] if out_types else None
    op = node.op
    if op in _BINARY and len(in_types) == 2 and len(dtypes) == 1 and None not in in_types:
        fn = _BINARY[op]
        out = out_types[0]
        same = tuple(i for i, t in enumerate(in_types) if t == out)

        def binary(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
            fn(a, b, out=out)

        return Adapter(binary, same)
    if op == "Div" and len(in_types) == 2 and len(dtypes) == 1 and _is_float(out0):

        def divide(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
            np.divide(a, b, out=out)

        return Adapter(divide, tuple(i for i, t in enumerate(in_types) if t == out_types[0]))
    if op == "Relu" and len(dtypes) == 1 and out0 is not None:
        zero = np.zeros((), dtype=out0.dtype)

        def relu(out: np.ndarray, x: np.ndarray) -> None:
            np.maximum(x, zero, out=out)

        return Adapter(relu, (0,))
    attrs: Any = node.attrs
    if op == "Softmax" and isinstance(attrs, SoftmaxAttrs) and _is_float(out0):
        axes = softmax_axes(attrs, _rank(out_types[0]))

        def softmax(out: np.ndarray, x: np.ndarray) -> None:
            """The reference's arithmetic in place; only the per-row max and sum are allocated."""
            np.subtract(x, x.max(axis=axes, keepdims=True), out=out)
            np.exp(out, out=out)
            np.divide(out, out.sum(axis=axes, keepdims=True), out=out)

        return Adapter(softmax, (0,))
    if op == "Concat" and isinstance(attrs, ConcatAttrs) and len(dtypes) == 1 and None not in in_types:
        axis = normalize_axis(attrs.axis, _rank(out_types[0]))

        def concat(out: np.ndarray, *xs: np.ndarray) -> None:
            np.concatenate(xs, axis=axis, out=out)

        return Adapter(concat)
    if op == "Transpose" and isinstance(attrs, TransposeAttrs) and len(dtypes) == 1:
        perm = transpose_perm(attrs, _rank(in_types[0]))

        def transpose(out: np.ndarray, x: np.ndarray) -> None:
            np.copyto(out, x.transpose(perm))

        return Adapter(transpose)
    data_dtypes = {t.dtype for t in (in_types[0], *out_types) if t is not None} if in_types else dtypes
    if op == "Split" and isinstance(attrs, SplitAttrs) and len(data_dtypes) == 1 and all(node.outputs):
        x = in_types[0]
        assert x is not None
        shape = x.dims
        axis = normalize_axis(attrs.axis, len(shape))
        parts = [t.dims[axis] for t in out_types if t is not None]
        if sum(parts) != shape[axis] or len(parts) != attrs.num_outputs:
            return None
        bounds = np.cumsum([0, *parts]).tolist()
        cuts = [
            tuple(slice(None) if a != axis else slice(bounds[k], bounds[k + 1]) for a in range(len(shape)))
            for k in range(len(parts))
        ]

        def split(outs: tuple[np.ndarray, ...], x: np.ndarray, *_: object) -> None:
            for out, cut in zip(outs, cuts):
                np.copyto(out, x[cut])

        return Adapter(split)
    return None


def _slabs(whole: TensorType, parts: Sequence[TensorType | None], axis: int) -> tuple[int, ...]:
    """Each part's byte offset in ``whole`` when they are contiguous slabs of it along ``axis``
    (every dimension before the axis is 1); () otherwise."""
    concrete = [t for t in parts if _concrete(t)]
    if not _concrete(whole) or len(concrete) != len(parts) or any(d != 1 for d in whole.dims[:axis]):
        return ()
    offsets, at = [], 0
    for t in concrete:
        offsets.append(at)
        at += int(np.prod(t.dims, dtype=np.int64)) * np.dtype(t.dtype).itemsize
    return tuple(offsets)


def concat_slabs(
    node: Node, in_types: Sequence[TensorType | None], out_types: Sequence[TensorType | None]
) -> tuple[int, ...]:
    """For a Concat whose inputs are contiguous slabs of its output (every dimension before the
    axis is 1), each input's byte offset in the output; () otherwise."""
    attrs: Any = node.attrs
    if node.op != "Concat" or not isinstance(attrs, ConcatAttrs) or not _concrete(out_types[0]):
        return ()
    whole = out_types[0]
    assert whole is not None
    return _slabs(whole, in_types, normalize_axis(attrs.axis, len(whole.dims)))


def split_slabs(
    node: Node, in_types: Sequence[TensorType | None], out_types: Sequence[TensorType | None]
) -> tuple[int, ...]:
    """For a Split whose outputs are contiguous slabs of its input (every dimension before the axis
    is 1, as for channels at batch 1: ShuffleNetV2's channel split), each output's byte offset in
    the input; () otherwise. The outputs can then be read where they lie (buffers.py)."""
    attrs: Any = node.attrs
    if node.op != "Split" or not isinstance(attrs, SplitAttrs) or not in_types or not _concrete(in_types[0]):
        return ()
    if not all(node.outputs) or len(out_types) != len(node.outputs):
        return ()
    whole = in_types[0]
    assert whole is not None
    return _slabs(whole, out_types, normalize_axis(attrs.axis, len(whole.dims)))
