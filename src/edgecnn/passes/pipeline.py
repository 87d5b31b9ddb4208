"""The ordered list of passes every model goes through before planning."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from edgecnn.ir.graph import Graph
from edgecnn.passes.base import PassResult
from edgecnn.passes.eliminate_dead import eliminate_dead
from edgecnn.passes.eliminate_noop import eliminate_noop
from edgecnn.passes.fold_constants import fold_constants

GraphPass = Callable[[Graph], PassResult]


@dataclass(frozen=True)
class PassReport:
    name: str
    changes: list[str]


PIPELINE: tuple[tuple[str, GraphPass], ...] = (
    ("fold_constants", fold_constants),
    ("eliminate_noop", eliminate_noop),
    ("eliminate_dead", eliminate_dead),
)


def optimize(
    graph: Graph, passes: Sequence[tuple[str, GraphPass]] = PIPELINE
) -> tuple[Graph, list[PassReport]]:
    """Run ``passes`` in order on a topologically sorted graph; report what each changed."""
    reports = []
    for name, graph_pass in passes:
        outcome = graph_pass(graph)
        graph = outcome.graph
        reports.append(PassReport(name, outcome.changes))
    return graph, reports
