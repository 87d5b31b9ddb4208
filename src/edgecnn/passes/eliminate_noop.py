"""Remove nodes that do nothing at inference: Identity, and Dropout whose mask nobody reads."""

from __future__ import annotations

from edgecnn.ir.graph import Graph
from edgecnn.passes.base import PassResult, rename_uses

NOOP_OPS = frozenset({"Identity", "Dropout"})


def eliminate_noop(graph: Graph) -> PassResult:
    result = graph.copy()
    changes = []
    used = {x for node in result.nodes for x in node.inputs} | set(result.outputs)
    kept = []
    for node in result.nodes:
        data_out = node.outputs[0] if node.outputs else ""
        removable = (
            node.op in NOOP_OPS
            and data_out not in result.outputs
            and all(o not in used for o in node.outputs[1:] if o)
        )
        if removable:
            rename_uses(result, data_out, node.inputs[0])
            changes.append(f"removed {node}")
        else:
            kept.append(node)
    result.nodes = kept
    return PassResult(result, changes)
