"""Tensor specs, nodes and the graph that importers build and the runtime executes."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Union

import numpy as np

from edgecnn.errors import GraphError, UnsupportedOperatorError

Dim = Union[int, str, None]
"""A dimension: a concrete size, a symbolic name ("batch"), or None when unknown."""

Shape = tuple[Dim, ...]


def format_shape(shape: Shape | None) -> str:
    if shape is None:
        return "[?]"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def concrete_dims(shape: Shape | None) -> tuple[int, ...]:
    """The shape as ints, for code that runs after shape inference made it concrete;
    GraphError if the rank or a dimension is still unknown or symbolic."""
    if shape is None:
        raise GraphError("a tensor's rank is unknown where a concrete shape is needed")
    dims: list[int] = []
    for d in shape:
        if d is None or isinstance(d, str):
            raise GraphError(f"shape {format_shape(shape)} is not concrete where it needs to be")
        dims.append(int(d))
    return tuple(dims)


@dataclass(frozen=True)
class TensorType:
    """Element type and shape of a tensor; shape None means the rank is unknown."""

    dtype: str
    shape: Shape | None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    # computed once per type: inference, kernel rules and the memory planner each ask per tensor
    @cached_property
    def is_concrete(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    @cached_property
    def dims(self) -> tuple[int, ...]:
        """The concrete shape as ints (see `concrete_dims`)."""
        return concrete_dims(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype}{format_shape(self.shape)}"


@dataclass(frozen=True)
class TensorSpec:
    """A named model input or output, as users see it: ``.name``, ``.shape``, ``.dtype``."""

    name: str
    dtype: str
    shape: Shape | None

    @property
    def type(self) -> TensorType:
        return TensorType(self.dtype, self.shape)

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}{format_shape(self.shape)}"


@dataclass
class Node:
    """One operator application. ``attrs`` is the op's frozen attribute dataclass.

    An empty string in ``inputs`` marks an omitted optional input.
    """

    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: Any = None

    def __str__(self) -> str:
        return f"{self.name or '<unnamed>'} ({self.op})"


@dataclass
class Graph:
    """A dataflow graph: declared inputs, constant initializers, nodes and named outputs."""

    inputs: list[TensorSpec]
    outputs: list[str]
    nodes: list[Node]
    initializers: dict[str, np.ndarray] = field(default_factory=dict)
    name: str = "graph"
    output_types: dict[str, TensorType] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def input_names(self) -> list[str]:
        return [spec.name for spec in self.inputs]

    def producers(self) -> dict[str, Node]:
        """Map tensor name -> node that produces it."""
        return {out: node for node in self.nodes for out in node.outputs if out}

    def consumers(self) -> dict[str, list[Node]]:
        """Map tensor name -> nodes that read it."""
        result: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in node.inputs:
                if name:
                    result.setdefault(name, []).append(node)
        return result

    def copy(self) -> Graph:
        """Structural copy: new node objects, lists and dicts; arrays and attrs are shared."""
        return self.with_nodes(
            [Node(n.op, n.name, list(n.inputs), list(n.outputs), n.attrs) for n in self.nodes]
        )

    def with_nodes(self, nodes: list[Node]) -> Graph:
        """A graph with ``nodes`` and copies of this one's lists and dicts (arrays shared): what a
        pass returns when it replaces nodes but never changes one in place."""
        return replace(
            self,
            inputs=list(self.inputs),
            outputs=list(self.outputs),
            nodes=nodes,
            initializers=dict(self.initializers),
            output_types=dict(self.output_types),
            metadata=dict(self.metadata),
        )

    def topological_order(self) -> list[int]:
        """Node indices in a dependency order, stable w.r.t. file order (the file's own order when
        it is one, found in one walk). Raises GraphError naming the nodes on a cycle."""
        available = set(self.input_names) | set(self.initializers) | {""}
        producer_index = {out: i for i, n in enumerate(self.nodes) for out in n.outputs if out}
        in_order = all(
            producer_index.get(x, -1) < i
            for i, node in enumerate(self.nodes)
            for x in node.inputs
            if x not in available
        )
        if in_order:  # what the heap below would return for a sorted graph, without it
            return list(range(len(self.nodes)))
        waiting_on = [0] * len(self.nodes)
        dependents: dict[int, list[int]] = {}
        for i, node in enumerate(self.nodes):
            deps = {producer_index[x] for x in node.inputs if x not in available and x in producer_index}
            waiting_on[i] = len(deps)
            for d in deps:
                dependents.setdefault(d, []).append(i)
        ready = [i for i, count in enumerate(waiting_on) if count == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for j in dependents.get(i, ()):
                waiting_on[j] -= 1
                if waiting_on[j] == 0:
                    heapq.heappush(ready, j)
        if len(order) != len(self.nodes):
            stuck = [str(self.nodes[i]) for i in range(len(self.nodes)) if waiting_on[i] > 0]
            raise GraphError(f"graph '{self.name}' has a cycle through node(s): {', '.join(stuck)}")
        return order

    def topologically_sorted(self) -> Graph:
        """Return a copy whose nodes are in a dependency order (stable w.r.t. file order).

        Raises GraphError naming the nodes on a cycle.
        """
        result = self.copy()
        result.nodes = [result.nodes[i] for i in self.topological_order()]
        return result

    def verify(self, known_ops: Iterable[str] | None = None) -> None:
        """Check the graph is executable; every problem is reported in one GraphError.

        Checks: unsupported operators (all listed), duplicate producers, inputs that nothing
        produces, outputs that nothing produces, and cycles.
        """
        if known_ops is not None:
            known = set(known_ops)
            unsupported = [(n.op, n.name) for n in self.nodes if n.op not in known]
            if unsupported:
                raise UnsupportedOperatorError(unsupported, source=f"graph '{self.name}'")
        problems: list[str] = []
        produced: dict[str, str] = {}
        for name in self.input_names:
            produced[name] = "graph input"
        for name in self.initializers:
            produced.setdefault(name, "initializer")
        for node in self.nodes:
            for out in node.outputs:
                if not out:
                    continue
                if out in produced and produced[out] != "initializer":
                    problems.append(
                        f"tensor '{out}' is produced twice (by {produced[out]} and by node {node})"
                    )
                produced[out] = f"node {node}"
        for node in self.nodes:
            for inp in node.inputs:
                if inp and inp not in produced:
                    problems.append(
                        f"node {node} reads '{inp}', which no node, input or initializer provides"
                    )
        for out in self.outputs:
            if out not in produced:
                problems.append(f"graph output '{out}' is not produced by anything")
        if problems:
            raise GraphError(f"graph '{self.name}' is invalid:\n  " + "\n  ".join(problems))
        self.topological_order()
