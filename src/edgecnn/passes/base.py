"""What every pass returns, and graph-rewiring helpers passes share."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgecnn.ir.graph import Graph


@dataclass
class PassResult:
    """The rewritten graph and one human-readable line per change (shown by `edgecnn info --passes`)."""

    graph: Graph
    changes: list[str] = field(default_factory=list)


def rename_uses(graph: Graph, old: str, new: str) -> None:
    """Make every reader of tensor ``old`` read ``new`` instead (in place)."""
    for node in graph.nodes:
        node.inputs = [new if x == old else x for x in node.inputs]


def single_consumer(graph: Graph, tensor: str) -> bool:
    """True when exactly one node reads ``tensor`` and it is not a graph output."""
    readers = sum(x == tensor for node in graph.nodes for x in node.inputs)
    return readers == 1 and tensor not in graph.outputs
