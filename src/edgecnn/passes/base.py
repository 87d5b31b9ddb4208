"""What every pass returns, and the naming of the tensors passes add."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgecnn.ir.graph import Graph


@dataclass
class PassResult:
    """The rewritten graph and one human-readable line per change (shown by `edgecnn info --passes`)."""

    graph: Graph
    changes: list[str] = field(default_factory=list)


def fresh_name(taken: set[str], base: str) -> str:
    """``base``, or ``base_2``, ``base_3``... : the first not in ``taken``, which it joins."""
    name, index = base, 1
    while name in taken:
        index += 1
        name = f"{base}_{index}"
    taken.add(name)
    return name
