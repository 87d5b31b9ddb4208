"""Gelu (kernel "gelu") against the numpy reference, both approximations, random shapes, large values
and NaN, one and two threads; and the Erf form exporters write (passes/fuse_gelu.py) turned into one
Gelu step in each of its orders, left alone when an intermediate is read elsewhere or a constant
differs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.activation import GeluAttrs
from edgecnn.passes.fuse_gelu import fuse_gelu
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run, tuned


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.lists(st.integers(1, 13), min_size=0, max_size=4),
    approximate=st.sampled_from(["none", "tanh"]),
    scale=st.sampled_from([1.0, 4.0, 100.0]),
    nan=st.booleans(),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_gelu_matches_reference(
    shape: list[int], approximate: str, scale: float, nan: bool, threads: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    if nan and x.size:
        x.reshape(-1)[rng.integers(0, x.size)] = np.nan
    attrs = GeluAttrs(approximate)
    with tuned(grain=0 if threads == 2 else 1 << 30), np.errstate(invalid="ignore", over="ignore"):
        actual, kernel = fast_run("Gelu", attrs, [x], (), threads)
        expected = reference_run("Gelu", attrs, [x], ())
    assert kernel == "gelu"
    assert_matches(actual, expected, magnitude=np.abs(x))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_extremes_match_reference(approximate: str) -> None:
    """Infinities, float32's limits, denormals, zeros and the range where exp(-x^2) underflows
    (the vectorised exponential's cut-off) give the reference's values."""
    limits = [np.inf, -np.inf, 3.4e38, -3.4e38, 1e-45, -1e-45, 0.0, -0.0, 1e-20, -1e-20]
    x = np.concatenate([np.asarray(limits, np.float32), np.linspace(-14, 14, 281, dtype=np.float32)])
    attrs = GeluAttrs(approximate)
    with np.errstate(invalid="ignore", over="ignore"):
        actual, kernel = fast_run("Gelu", attrs, [x], (), 1)
        expected = reference_run("Gelu", attrs, [x], ())
    assert kernel == "gelu"
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    assert_matches(actual, expected, magnitude=np.abs(x))


CONSTANTS = {
    "root2": np.array(math.sqrt(2.0), np.float32),
    "root_half": np.array(math.sqrt(0.5), np.float32),
    "one": np.array(1.0, np.float32),
    "half": np.array(0.5, np.float32),
}


def erf_form(half_first: bool, multiply: bool, swap: bool) -> list[Node]:
    """x -> GELU(x) -> y as exporters write it, in one of its orders."""
    scale = Node("Mul", "scale", ["root_half", "x"] if swap else ["x", "root_half"], ["d"])
    nodes = [
        scale if multiply else Node("Div", "scale", ["x", "root2"], ["d"]),
        Node("Erf", "erf", ["d"], ["e"]),
    ]
    nodes.append(Node("Add", "plus", ["one", "e"] if swap else ["e", "one"], ["p"]))
    if half_first:
        nodes += [Node("Mul", "halve", ["x", "half"], ["h"]), Node("Mul", "product", ["p", "h"], ["y"])]
    else:
        nodes += [Node("Mul", "product", ["x", "p"], ["m"]), Node("Mul", "halve", ["m", "half"], ["y"])]
    return nodes


def graph_of(nodes: list[Node], outputs: list[str]) -> Graph:
    return Graph([TensorSpec("x", "float32", (2, 5, 7))], outputs, nodes, dict(CONSTANTS))


def run(graph: Graph) -> dict[str, np.ndarray]:
    x = np.random.default_rng(0).standard_normal((2, 5, 7)).astype(np.float32) * 3
    return Model(graph, RuntimeOptions.resolve(optimize=False)).run({"x": x})


@pytest.mark.parametrize("half_first", [False, True])
@pytest.mark.parametrize("multiply", [False, True])
@pytest.mark.parametrize("swap", [False, True])
def test_erf_form_becomes_one_gelu(half_first: bool, multiply: bool, swap: bool) -> None:
    graph = graph_of(erf_form(half_first, multiply, swap), ["y"])
    result = fuse_gelu(graph)
    (gelu,) = result.graph.nodes
    assert gelu.op == "Gelu" and gelu.inputs == ["x"] and gelu.outputs == ["y"]
    assert len(result.changes) == 1
    assert_matches(run(result.graph)["y"], run(graph)["y"])


def test_erf_form_left_alone_when_shared_or_different() -> None:
    shared = graph_of(erf_form(False, False, False), ["y", "e"])  # erf's output is also returned
    assert not fuse_gelu(shared).changes
    nodes = erf_form(False, False, False)
    nodes[0] = Node("Div", "scale", ["x", "one"], ["d"])  # x / 1 is not GELU
    assert not fuse_gelu(graph_of(nodes, ["y"])).changes


def test_erf_form_runs_as_one_compiled_step() -> None:
    model = Model(graph_of(erf_form(False, False, False), ["y"]), RuntimeOptions.resolve(threads=1))
    x = np.zeros((2, 5, 7), np.float32)
    assert [(s.node.op, s.kernel.name) for s in model.plan_for({"x": x}).steps] == [("Gelu", "gelu")]
