"""Building blocks for the traits op modules declare at ``register_op`` (per-sample rules, weight
positions, multiply-accumulate counts), and the graph-level questions answered from them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.ops.common import normalize_axis
from edgecnn.ops.registry import MacsFn, StepShapes, find_op


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
    return tuple(t.shape) if t is not None and t.is_concrete else None  # type: ignore[arg-type]


def numel(t: TensorType | None) -> int:
    """Elements of a tensor type; 0 when the type or its shape is unknown."""
    if t is None or not t.is_concrete:
        return 0
    return int(np.prod(t.shape, dtype=np.int64))  # type: ignore[arg-type]


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
