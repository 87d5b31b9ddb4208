"""Remove nodes that do nothing at inference: Identity, and Dropout whose mask nobody reads."""

from __future__ import annotations

from edgecnn.ir.graph import Graph
from edgecnn.passes.base import PassResult

NOOP_OPS = frozenset({"Identity", "Dropout"})


def eliminate_noop(graph: Graph) -> PassResult:
    """Readers of a removed node's output read its input instead; one walk in topological order,
    renames resolved as they are met (a chain of no-ops costs its length, not its square)."""
    result = graph.copy()
    changes = []
    used = {x for node in result.nodes for x in node.inputs} | set(result.outputs)
    alias: dict[str, str] = {}  # removed output -> the tensor its readers read instead
    kept = []
    for node in result.nodes:
        node.inputs = [alias.get(x, x) for x in node.inputs]
        data_out = node.outputs[0] if node.outputs else ""
        removable = (
            node.op in NOOP_OPS
            and data_out not in result.outputs
            and all(o not in used for o in node.outputs[1:] if o)
        )
        if removable:
            alias[data_out] = node.inputs[0]
            changes.append(f"removed {node}")
        else:
            kept.append(node)
    result.nodes = kept
    return PassResult(result, changes)
