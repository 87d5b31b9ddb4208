"""What every pass returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgecnn.ir.graph import Graph


@dataclass
class PassResult:
    """The rewritten graph and one human-readable line per change (shown by `edgecnn info --passes`)."""

    graph: Graph
    changes: list[str] = field(default_factory=list)
