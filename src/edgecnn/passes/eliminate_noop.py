"""Remove nodes that do nothing at inference: Identity, and Dropout whose mask nobody reads."""

from __future__ import annotations

from edgecnn.ir.graph import Graph, Node
from edgecnn.passes.base import PassResult

NOOP_OPS = frozenset({"Identity", "Dropout"})


def eliminate_noop(graph: Graph) -> PassResult:
    """Readers of a removed node's output read its input instead; one walk in topological order,
    renames resolved as they are met (a chain of no-ops costs its length, not its square). Only
    the readers it renames are copied: the other nodes are shared with ``graph``."""
    if not any(node.op in NOOP_OPS for node in graph.nodes):
        return PassResult(graph)
    changes = []
    used = {x for node in graph.nodes for x in node.inputs} | set(graph.outputs)
    alias: dict[str, str] = {}  # removed output -> the tensor its readers read instead
    kept = []
    for node in graph.nodes:
        inputs = [alias.get(x, x) for x in node.inputs]
        if inputs != node.inputs:
            node = Node(node.op, node.name, inputs, list(node.outputs), node.attrs)
        data_out = node.outputs[0] if node.outputs else ""
        removable = (
            node.op in NOOP_OPS
            and data_out not in graph.outputs
            and all(o not in used for o in node.outputs[1:] if o)
        )
        if removable:
            alias[data_out] = node.inputs[0]
            changes.append(f"removed {node}")
        else:
            kept.append(node)
    return PassResult(graph.with_nodes(kept), changes)
