"""Building blocks for the traits op modules declare at ``register_op`` (per-sample rules, weight
positions, multiply-accumulate counts, write-into references), and the graph-level questions
answered from them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.ops.common import normalize_axis
from edgecnn.ops.registry import IntoAdapter, MacsFn, StepShapes, find_op


def each_image(step: StepShapes) -> bool:
    """Per image when its constant inputs are filters or parameters, not operands broadcast
    against the images (convolutions, Unsqueeze whose new axis 0 the plan checks)."""
    return True


def broadcast_per_image(step: StepShapes) -> bool:
    """Per image when no constant operand varies along the batch axis (elementwise ops)."""
    return all(c is None or c.ndim != step.output_rank or c.shape[0] == 1 for c in step.constants)


def axis_not_batch(step: StepShapes) -> bool:
    """Per image when the op's ``axis`` attribute is not the batch axis (Concat, Softmax...)."""
    x = step.inputs[0] if step.inputs else None
    if x is None or not hasattr(step.attrs, "axis"):
        return False
    return normalize_axis(step.attrs.axis, len(x)) != 0


def _dims(t: TensorType | None) -> tuple[int, ...] | None:
    return t.dims if t is not None and t.is_concrete else None


def one_dtype(*types: TensorType | None) -> bool:
    """The given types (None: omitted) share one element type: what a ufunc's ``out=`` needs to
    give the reference's result."""
    return len({t.dtype for t in types if t is not None}) == 1


def numel(t: TensorType | None) -> int:
    """Elements of a tensor type; 0 when the type or its shape is unknown."""
    if t is None or not t.is_concrete:
        return 0
    return int(np.prod(t.dims, dtype=np.int64))


def _operands(
    inputs: Sequence[TensorType | None], weight_index: int
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(data dims, weight dims), or None when either is missing or not concrete."""
    weights = _dims(inputs[weight_index]) if len(inputs) > weight_index else None
    data = _dims(inputs[0]) if inputs else None
    return None if weights is None or data is None else (data, weights)


def conv_macs(weight_index: int = 1) -> MacsFn:
    """Each output element sums over (C_in / group) x kernel window."""

    def macs(attrs: Any, inputs: Sequence[TensorType | None], output: TensorType | None) -> int:
        found = _operands(inputs, weight_index)
        return 0 if found is None else numel(output) * int(np.prod(found[1][1:], dtype=np.int64))

    return macs


def conv_transpose_macs(attrs: Any, inputs: Sequence[TensorType | None], output: TensorType | None) -> int:
    """Each input element scatters into (C_out / group) x kernel window outputs."""
    found = _operands(inputs, 1)
    return 0 if found is None else numel(inputs[0]) * int(np.prod(found[1][1:], dtype=np.int64))


def gemm_macs(weight_index: int = 1) -> MacsFn:
    """Each output element sums over the inner dimension of A (its rows when ``trans_a``)."""

    def macs(attrs: Any, inputs: Sequence[TensorType | None], output: TensorType | None) -> int:
        found = _operands(inputs, weight_index)
        if found is None:
            return 0
        data = found[0]
        return numel(output) * (data[0] if getattr(attrs, "trans_a", False) else data[-1])

    return macs


def matmul_macs(weight_index: int = 1) -> MacsFn:
    """Each output element sums over the last axis of A."""

    def macs(attrs: Any, inputs: Sequence[TensorType | None], output: TensorType | None) -> int:
        found = _operands(inputs, weight_index)
        return 0 if found is None else numel(output) * found[0][-1]

    return macs


def layer_macs(node: Node, inputs: Sequence[TensorType | None], output: TensorType | None) -> int:
    """Multiply-accumulates of one run of ``node`` (its op's ``macs`` trait); 0 for data movement
    and elementwise ops."""
    definition = find_op(node.op)
    if definition is None or definition.macs is None:
        return 0
    return definition.macs(node.attrs, inputs, output)


def weight_of(node: Node, initializers: Mapping[str, np.ndarray]) -> tuple[str, int] | None:
    """The initializer ``node`` reads as its weights and the axis of its output channels (its op's
    ``weight`` trait), or None."""
    definition = find_op(node.op)
    if definition is None or definition.weight is None:
        return None
    values = [initializers.get(x) if x else None for x in node.inputs]
    found = definition.weight(node.attrs, values)
    return None if found is None else (node.inputs[found[0]], found[1])


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
    if x is None or y is None or not (x.is_concrete and y.is_concrete) or x.dtype != y.dtype:
        return False
    return numel(x) == numel(y)


def reference_adapter(
    node: Node, in_types: Sequence[TensorType | None], out_types: Sequence[TensorType | None]
) -> IntoAdapter | None:
    """The write-into form of ``node``'s reference kernel (its op's ``reference_into`` trait) for
    these types, or None: the op declares none, or a type is not concrete."""
    definition = find_op(node.op)
    if definition is None or definition.reference_into is None:
        return None
    outs = [t for t in out_types if t is not None and t.is_concrete]
    if len(outs) != len(out_types) or not all(t.is_concrete for t in in_types if t is not None):
        return None
    return definition.reference_into(node.attrs, in_types, outs)


def slab_offsets(
    node: Node, in_types: Sequence[TensorType | None], out_types: Sequence[TensorType | None]
) -> tuple[int, ...]:
    """For an op that declares ``slabs``, when the parts (its inputs for "inputs", its outputs for
    "outputs") are contiguous slabs of the whole along ``attrs.axis`` (every dimension before the
    axis is 1, as for channels at batch 1), each part's byte offset in the whole; () otherwise."""
    definition = find_op(node.op)
    if definition is None or definition.slabs is None or not in_types or not out_types:
        return ()
    whole, parts = (out_types[0], in_types) if definition.slabs == "inputs" else (in_types[0], out_types)
    dims = _dims(whole)
    known = [t for t in parts if t is not None and t.is_concrete]
    if dims is None or len(known) != len(parts):
        return ()
    if any(d != 1 for d in dims[: normalize_axis(node.attrs.axis, len(dims))]):
        return ()
    offsets, at = [], 0
    for t in known:
        offsets.append(at)
        at += numel(t) * np.dtype(t.dtype).itemsize
    return tuple(offsets)
