"""Whole-graph type inference, with folding of constant subgraphs.

With concrete input shapes, shape-computing subgraphs (Shape -> Gather -> Concat -> Reshape, as
exporters write them) become constants here, so every tensor gets a concrete type.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from edgecnn.errors import EdgeCNNError, GraphError
from edgecnn.ir.dtypes import SUPPORTED_DTYPES, dtype_name
from edgecnn.ir.graph import Graph, Node, TensorType
from edgecnn.limits import MemoryBudget
from edgecnn.ops.common import MAX_RANK
from edgecnn.ops.registry import get_op, known_ops

FOLD_LIMIT_ELEMENTS = 1 << 24
"""Constant results larger than this stay as runtime steps (no runaway allocation at plan time)."""


@dataclass
class InferenceResult:
    types: dict[str, TensorType] = field(default_factory=dict)
    values: dict[str, np.ndarray] = field(default_factory=dict)  # constants incl. folded tensors
    folded_nodes: set[int] = field(default_factory=set)  # ids of nodes evaluated at plan time


def type_of_value(value: np.ndarray) -> TensorType:
    return TensorType(dtype_name(value.dtype), tuple(int(d) for d in value.shape))


_ITEMSIZE = {name: np.dtype(name).itemsize for name in SUPPORTED_DTYPES}


def type_nbytes(t: TensorType) -> int:
    """Bytes of a tensor of concrete type ``t`` (exact: no int64 wrap-around on huge shapes);
    ValueError for an element type edgecnn does not support."""
    itemsize = _ITEMSIZE.get(t.dtype)
    if itemsize is None:
        raise ValueError(f"element type {t.dtype!r} is not supported")
    return math.prod(t.dims) * itemsize


def node_context(node: Node, types: list[TensorType | None]) -> str:
    shown = ", ".join("-" if t is None else str(t) for t in types)
    return f"node {node} with inputs ({shown})"


def check_arity(node: Node, count: int | None = None) -> None:
    """GraphError unless the node has as many inputs (``count``, default all it lists) as its
    operator takes: passes and kernels index them without checking."""
    opdef = get_op(node.op)
    count = len(node.inputs) if count is None else count
    if count < opdef.min_inputs or (opdef.max_inputs is not None and count > opdef.max_inputs):
        expected = (
            opdef.min_inputs
            if opdef.max_inputs == opdef.min_inputs
            else (f"{opdef.min_inputs}..{opdef.max_inputs if opdef.max_inputs is not None else 'n'}")
        )
        raise GraphError(f"node {node}: expects {expected} inputs, got {count}")


def infer_node(
    node: Node, types: list[TensorType | None], values: list[np.ndarray | None]
) -> list[TensorType]:
    """Output types of one node; any failure becomes a GraphError naming the node."""
    opdef = get_op(node.op)
    check_arity(node, len(types))
    try:
        out = opdef.infer(node.attrs, types, values)
    except EdgeCNNError:
        raise
    except (ValueError, TypeError, IndexError, KeyError, ArithmeticError, RecursionError) as exc:
        raise GraphError(f"{node_context(node, types)}: {exc}") from None
    if len(out) < len(node.outputs):
        raise GraphError(f"node {node}: has {len(node.outputs)} outputs, the operator defines {len(out)}")
    return list(out)


def infer_graph(
    graph: Graph,
    input_types: Mapping[str, TensorType],
    *,
    fold: bool = True,
    budget: MemoryBudget | None = None,
) -> InferenceResult:
    """Infer every tensor's type, given the graph's input types; fold constant nodes if ``fold``.

    Every tensor of known size is checked against ``budget`` (default: ``MemoryBudget.default()``)
    and folded constants are added up, before anything is evaluated: a GraphError names the node,
    the tensor and the size. The graph must be topologically sorted.
    """
    budget = budget or MemoryBudget.default()
    folded = budget.tally(f"graph '{graph.name}': constants folded at plan time", GraphError)
    result = InferenceResult()
    result.types.update(input_types)
    for name, value in graph.initializers.items():
        if name not in input_types:
            result.values[name] = value
            result.types[name] = type_of_value(value)
    ops = known_ops()
    for node in graph.nodes:
        if node.op not in ops:
            raise GraphError(f"node {node}: unsupported operator {node.op}")
        types = [result.types.get(x) if x else None for x in node.inputs]
        for x, t in zip(node.inputs, types):
            if x and t is None:
                raise GraphError(f"node {node} reads '{x}', which is not available before it")
        values = [result.values.get(x) if x else None for x in node.inputs]
        if fold and get_op(node.op).shape_only:
            values = [v if v is not None else _shape_stand_in(t) for v, t in zip(values, types)]
        out_types = infer_node(node, types, values)
        for name, t in zip(node.outputs, out_types):
            if name:
                _check_output(node, name, t, budget)
        if fold and _worth_folding(node, values, out_types):
            folded.add(sum(type_nbytes(t) for t in out_types), f"node {node}")
            outputs = evaluate(node, values)
            result.folded_nodes.add(id(node))
            for name, value in zip(node.outputs, outputs):
                if name:
                    result.values[name] = value
                    result.types[name] = type_of_value(value)
            continue
        for name, t in zip(node.outputs, out_types):
            if name:
                result.types[name] = t
    return result


def _check_output(node: Node, name: str, t: TensorType, budget: MemoryBudget) -> None:
    """A GraphError naming the node and tensor for an output of too many dimensions, of an
    element type edgecnn does not support, or larger alone than the budget."""
    if t.shape is not None and len(t.shape) > MAX_RANK:
        raise GraphError(f"node {node}: tensor '{name}' has {len(t.shape)} dimensions, over {MAX_RANK}")
    if t.dtype not in _ITEMSIZE:
        raise GraphError(f"node {node}: tensor '{name}' has element type {t.dtype!r}, which is not supported")
    if t.is_concrete:
        nbytes = type_nbytes(t)
        if nbytes > budget.limit:  # the message is formatted only for a refusal
            budget.check(nbytes, f"node {node}: tensor '{name}' ({t})", GraphError)


def _worth_folding(node: Node, values: list[np.ndarray | None], out_types: list[TensorType]) -> bool:
    """Fold when every input is constant and every output is known to be small."""
    if not get_op(node.op).foldable or any(v is None for x, v in zip(node.inputs, values) if x):
        return False
    return all(t.is_concrete and math.prod(t.dims) <= FOLD_LIMIT_ELEMENTS for t in out_types)


def _shape_stand_in(t: TensorType | None) -> np.ndarray | None:
    """A zero-stride array with t's shape: what Shape/Size need, without allocating the tensor."""
    if t is None or not t.is_concrete:
        return None
    return np.broadcast_to(np.zeros((), t.dtype), t.dims)


def evaluate(node: Node, values: list[np.ndarray | None]) -> tuple[np.ndarray, ...]:
    """Run a node's reference kernel on constant inputs (plan-time folding)."""
    opdef = get_op(node.op)
    types = [None if v is None else type_of_value(v) for v in values]
    try:
        outputs = opdef.run_reference(node.attrs, values)
    except EdgeCNNError:
        raise
    except (ValueError, TypeError, IndexError, KeyError, ArithmeticError, RecursionError) as exc:
        raise GraphError(f"{node_context(node, types)}: {exc}") from None
    return tuple(np.asarray(o) for o in outputs)
