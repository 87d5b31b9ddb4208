"""Remove nodes whose outputs nothing reads, and initializers nothing uses."""

from __future__ import annotations

from edgecnn.ir.graph import Graph
from edgecnn.passes.base import PassResult


def eliminate_dead(graph: Graph) -> PassResult:
    result = graph.with_nodes(list(graph.nodes))
    needed = set(result.outputs)
    kept = []
    changes = []
    for node in reversed(result.nodes):  # graphs reaching passes are topologically sorted
        if any(o in needed for o in node.outputs if o):
            kept.append(node)
            needed.update(x for x in node.inputs if x)
        else:
            changes.append(f"removed unused {node}")
    result.nodes = kept[::-1]
    unused = [name for name in result.initializers if name not in needed]
    for name in unused:
        del result.initializers[name]
    if unused:
        changes.append(f"dropped {len(unused)} unused initializer(s)")
    return PassResult(result, changes[::-1])
