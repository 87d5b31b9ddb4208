"""Evaluate, once, every node whose inputs are all constants; its outputs become initializers."""

from __future__ import annotations

from edgecnn.ir.graph import Graph
from edgecnn.passes.base import PassResult
from edgecnn.runtime.shapes import infer_graph


def fold_constants(graph: Graph) -> PassResult:
    declared = {spec.name: spec.type for spec in graph.inputs if spec.name not in graph.initializers}
    inferred = infer_graph(graph, declared, fold=True)
    if not inferred.folded_nodes:
        return PassResult(graph)
    result = graph.copy()
    changes = []
    kept = []
    for original, node in zip(graph.nodes, result.nodes):
        if id(original) in inferred.folded_nodes:
            for name in node.outputs:
                if name:
                    result.initializers[name] = inferred.values[name]
            changes.append(f"folded {node}")
        else:
            kept.append(node)
    result.nodes = kept
    return PassResult(result, changes)
