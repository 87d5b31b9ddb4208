"""Loading and planning stay linear in a graph's size, checked by counting work, never by timing.

A model four times larger may make four times the Python calls while it is verified, optimised,
inferred, given kernels and a memory plan, and run once; a step that walks the graph (or everything
placed so far) per node makes sixteen times. The passes copy the graph's nodes at most once per
load, not once per pass (lab/planning_scale.py measures the times).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import numpy as np
import pytest

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.passes import optimize
from edgecnn.runtime.options import RuntimeOptions

Built = tuple[Graph, np.ndarray]


def relu_chain(n: int) -> Built:
    nodes = [Node("Relu", f"r{i}", [f"t{i}"], [f"t{i + 1}"], NoAttrs()) for i in range(n)]
    graph = Graph([TensorSpec("t0", "float32", (1, 8))], [f"t{n}"], nodes, name="relu")
    return graph, np.ones((1, 8), np.float32)


def conv_relu_chain(n: int) -> Built:
    """n/2 Conv + Relu pairs: fused by the passes, each convolution given a kernel by its rules."""
    attrs = ConvAttrs(kernel_shape=(3, 3), pads=(1, 1, 1, 1))
    rng = np.random.default_rng(0)
    nodes, weights = [], {}
    for i in range(n // 2):
        weights[f"w{i}"] = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
        nodes.append(Node("Conv", f"c{i}", [f"t{i}", f"w{i}"], [f"u{i}"], attrs))
        nodes.append(Node("Relu", f"r{i}", [f"u{i}"], [f"t{i + 1}"], NoAttrs()))
    graph = Graph([TensorSpec("t0", "float32", (1, 4, 6, 6))], [f"t{n // 2}"], nodes, weights, "convrelu")
    return graph, np.ones((1, 4, 6, 6), np.float32)


def branching(n: int) -> Built:
    """Blocks of four branches (Relu -> Sigmoid) off one tensor, summed by Adds: many branches and
    joins, a bounded number alive at once (a graph with all its branches alive at once costs the
    arena placement the square of their number, lab/notes/2026-11-28-planning-speed.md)."""
    nodes: list[Node] = []
    x = "x"
    for b in range(max(1, n // 11)):
        ends = []
        for i in range(4):
            nodes.append(Node("Relu", f"r{b}_{i}", [x], [f"a{b}_{i}"], NoAttrs()))
            nodes.append(Node("Sigmoid", f"s{b}_{i}", [f"a{b}_{i}"], [f"e{b}_{i}"], NoAttrs()))
            ends.append(f"e{b}_{i}")
        nodes.append(Node("Add", f"p{b}", ends[:2], [f"p{b}"], NoAttrs()))
        nodes.append(Node("Add", f"q{b}", ends[2:], [f"q{b}"], NoAttrs()))
        nodes.append(Node("Add", f"x{b}", [f"p{b}", f"q{b}"], [f"x{b}"], NoAttrs()))
        x = f"x{b}"
    graph = Graph([TensorSpec("x", "float32", (1, 8))], [x], nodes, name="branching")
    return graph, np.ones((1, 8), np.float32)


SHAPES = {"relu chain": relu_chain, "conv+relu chain": conv_relu_chain, "branching": branching}
OPTIONS = RuntimeOptions.resolve(threads=1)


def load_and_run(build: Callable[[int], Built], n: int) -> np.ndarray:
    graph, x = build(n)
    (y,) = Model(graph, OPTIONS).run(x).values()
    return y


def python_calls(build: Callable[[int], Built], n: int) -> int:
    """Python function calls made by loading an ``n``-node graph and running it once."""
    graph, x = build(n)
    calls = 0

    def count(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count)
    try:
        Model(graph, OPTIONS).run(x)
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.parametrize("shape", SHAPES)
def test_loading_and_planning_work_grows_linearly(shape: str) -> None:
    build = SHAPES[shape]
    load_and_run(build, 12)  # kernels compiled and modules imported outside the count
    small, large = python_calls(build, 400), python_calls(build, 1600)
    assert large < 4.4 * small, (small, large)


@contextmanager
def counting_nodes() -> Iterator[list[int]]:
    """Counts Node objects created inside the block."""
    created = [0]
    original = Node.__init__

    def init(self: Node, *args: Any, **kwargs: Any) -> None:
        created[0] += 1
        original(self, *args, **kwargs)

    Node.__init__ = init  # type: ignore[method-assign]
    try:
        yield created
    finally:
        Node.__init__ = original  # type: ignore[method-assign]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_load_copies_the_nodes_once_not_once_per_pass(shape: str) -> None:
    """The model's own sorted copy, plus the nodes a pass creates (a fused Conv per pair); the
    passes that change nothing, or only replace nodes, share the others."""
    graph, _ = SHAPES[shape](600)
    with counting_nodes() as created:
        model = Model(graph, OPTIONS)
    fused = len(graph.nodes) - len(model.optimized_graph.nodes)
    assert created[0] <= len(graph.nodes) + fused, (created[0], len(graph.nodes))


def test_passes_leave_the_graph_they_are_given_unchanged() -> None:
    """Passes share nodes between the graphs they return: none may change one in place."""
    graph, x = conv_relu_chain(6)
    graph.nodes.insert(0, Node("Identity", "id", ["t0"], ["t0i"], NoAttrs()))
    graph.nodes[1].inputs[0] = "t0i"
    before = [(n.op, list(n.inputs), list(n.outputs), n.attrs) for n in graph.nodes]
    optimized, _ = optimize(graph)
    assert [(n.op, list(n.inputs), list(n.outputs), n.attrs) for n in graph.nodes] == before
    assert [n.op for n in optimized.nodes] == ["FusedConv"] * 3
    assert optimized.nodes[0].inputs[0] == "t0"
    reference = Model(graph, RuntimeOptions.resolve(threads=1, optimize=False)).run(x)
    np.testing.assert_allclose(Model(graph, OPTIONS).run(x)["t3"], reference["t3"], rtol=1e-5, atol=1e-6)
