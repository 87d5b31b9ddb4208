"""Evaluate, once, every node whose inputs are all constants; its outputs become initializers."""

from __future__ import annotations

from edgecnn.ir.graph import Graph
from edgecnn.ops.registry import find_op
from edgecnn.passes.base import PassResult
from edgecnn.runtime.shapes import infer_graph


def fold_constants(graph: Graph) -> PassResult:
    declared = {spec.name: spec.type for spec in graph.inputs if spec.name not in graph.initializers}
    if not may_fold(graph, set(declared)):
        return PassResult(graph)  # nothing to evaluate: no whole-graph inference
    inferred = infer_graph(graph, declared, fold=True)
    if not inferred.folded_nodes:
        return PassResult(graph)
    result = graph.with_nodes([])
    changes = []
    for node in graph.nodes:
        if id(node) in inferred.folded_nodes:
            for name in node.outputs:
                if name:
                    result.initializers[name] = inferred.values[name]
            changes.append(f"folded {node}")
        else:
            result.nodes.append(node)
    return PassResult(result, changes)


def may_fold(graph: Graph, inputs: set[str]) -> bool:
    """Whether inference could fold a node: one reading shapes only, or a foldable one whose
    inputs are all initializers (not overridden by ``inputs``). In topological order the first
    node that folds is one of those, so without any nothing folds."""
    constants = set(graph.initializers) - inputs
    for node in graph.nodes:
        definition = find_op(node.op)
        if definition is None or definition.shape_only:
            return True  # unknown ops: inference reports them
        if definition.foldable and all(x in constants for x in node.inputs if x):
            return True
    return False
