"""Before/after tests of fuse_activation on pools: act(pool(x)) becomes one FusedMaxPool/FusedAveragePool
step whose outputs equal the two steps'; pools whose output anything else reads, or whose reader is
not an activation a fused step can apply, are left alone."""

from __future__ import annotations

import numpy as np
import pytest

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.activation import LeakyReluAttrs
from edgecnn.ops.fused_pool import FusedAveragePoolAttrs, FusedMaxPoolAttrs
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.passes.fuse_activation import fuse_activation
from edgecnn.runtime.options import RuntimeOptions

MAX = MaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2), ceil_mode=True)  # Caffe's pool1
AVERAGE = AveragePoolAttrs(kernel_shape=(2, 2), pads=(1, 1, 0, 0), count_include_pad=True)
FEEDS = {"x": np.random.default_rng(0).uniform(-3, 3, (2, 3, 9, 8)).astype(np.float32)}


def pool_graph(pool: Node, after: list[Node], outputs: list[str], constants: dict | None = None) -> Graph:
    return Graph([TensorSpec("x", "float32", (2, 3, 9, 8))], outputs, [pool, *after], constants or {})


def pool_node(attrs: object = MAX) -> Node:
    return Node("MaxPool" if isinstance(attrs, MaxPoolAttrs) else "AveragePool", "pool", ["x"], ["p"], attrs)


def run(graph: Graph) -> dict[str, np.ndarray]:
    return Model(graph, RuntimeOptions.resolve(optimize=False)).run(FEEDS)


def assert_same_outputs(before: Graph, after: Graph) -> None:
    expected, actual = run(before), run(after)
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-6, atol=1e-6, err_msg=name)


ACTIVATIONS = [
    (Node("Relu", "act", ["p"], ["y"]), {}, "relu"),
    (Node("LeakyRelu", "act", ["p"], ["y"], LeakyReluAttrs(0.2)), {}, "leaky_relu"),
    (Node("Clip", "act", ["p", "lo", "hi"], ["y"]), {"lo": np.float32(0), "hi": np.float32(6)}, "clip"),
    (Node("Clip", "act", ["p", "", "hi"], ["y"]), {"hi": np.float32(0.5)}, "clip"),
    (Node("Sigmoid", "act", ["p"], ["y"]), {}, "sigmoid"),
    (Node("HardSwish", "act", ["p"], ["y"]), {}, "hard_swish"),
]


@pytest.mark.parametrize("attrs", [MAX, AVERAGE], ids=["max", "average"])
@pytest.mark.parametrize(("activation", "constants", "name"), ACTIVATIONS, ids=[a[2] for a in ACTIVATIONS])
def test_pool_then_activation_fuses(attrs: object, activation: Node, constants: dict, name: str) -> None:
    graph = pool_graph(
        pool_node(attrs), [activation], ["y"], {k: np.asarray(v) for k, v in constants.items()}
    )
    result = fuse_activation(graph)
    (fused,) = result.graph.nodes
    expected_op, expected_attrs = (
        ("FusedMaxPool", FusedMaxPoolAttrs) if attrs is MAX else ("FusedAveragePool", FusedAveragePoolAttrs)
    )
    assert (fused.op, fused.name, fused.inputs, fused.outputs) == (expected_op, "pool", ["x"], ["y"])
    assert type(fused.attrs) is expected_attrs and fused.attrs.activation == name
    assert fused.attrs.kernel_shape == attrs.kernel_shape and fused.attrs.pads == attrs.pads  # type: ignore[attr-defined]
    assert result.changes == [f"fused {graph.nodes[0]} + {activation} -> {expected_op} ({name})"]
    assert_same_outputs(graph, result.graph)


def test_silu_after_a_pool_fuses() -> None:
    sigmoid = Node("Sigmoid", "gate", ["p"], ["s"])
    mul = Node("Mul", "silu", ["s", "p"], ["y"])
    graph = pool_graph(pool_node(AVERAGE), [sigmoid, mul], ["y"])
    result = fuse_activation(graph)
    assert [(n.op, n.outputs, n.attrs.activation) for n in result.graph.nodes] == [
        ("FusedAveragePool", ["y"], "silu")
    ]
    assert_same_outputs(graph, result.graph)


def test_the_fused_graph_keeps_the_nodes_around_it() -> None:
    """pool -> relu -> pool -> relu: both pairs fuse, in order, the second reading the first."""
    graph = pool_graph(
        pool_node(),
        [
            Node("Relu", "relu1", ["p"], ["r"]),
            Node("MaxPool", "pool2", ["r"], ["q"], MaxPoolAttrs(kernel_shape=(2, 2))),
            Node("Relu", "relu2", ["q"], ["y"]),
        ],
        ["y"],
    )
    result = fuse_activation(graph)
    assert [(n.op, n.name, n.inputs, n.outputs) for n in result.graph.nodes] == [
        ("FusedMaxPool", "pool", ["x"], ["r"]),
        ("FusedMaxPool", "pool2", ["r"], ["y"]),
    ]
    assert len(result.changes) == 2
    assert_same_outputs(graph, result.graph)


@pytest.mark.parametrize(
    ("after", "outputs"),
    [
        ([Node("Relu", "act", ["p"], ["y"]), Node("Neg", "other", ["p"], ["z"])], ["y", "z"]),  # p read twice
        ([Node("Relu", "act", ["p"], ["y"])], ["y", "p"]),  # the pool's output is a model output
        ([Node("Tanh", "act", ["p"], ["y"])], ["y"]),  # no fused form
        ([Node("Clip", "act", ["p", "lo"], ["y"])], ["y"]),  # a bound fed at run time
        ([Node("Add", "act", ["p", "p"], ["y"])], ["y"]),  # not an activation
    ],
    ids=["two-readers", "pool-is-output", "tanh", "runtime-bound", "add"],
)
def test_left_alone(after: list[Node], outputs: list[str]) -> None:
    graph = pool_graph(pool_node(), after, outputs)
    if any("lo" in node.inputs for node in after):
        graph.inputs.append(TensorSpec("lo", "float32", ()))
    result = fuse_activation(graph)
    assert [(n.op, n.name) for n in result.graph.nodes] == [(n.op, n.name) for n in graph.nodes]
    assert result.changes == []


def test_global_pools_and_pools_with_an_activation_are_left_alone() -> None:
    for op, attrs in [
        ("GlobalAveragePool", NoAttrs()),
        ("FusedMaxPool", FusedMaxPoolAttrs(kernel_shape=(2, 2), activation="sigmoid")),
    ]:
        graph = pool_graph(Node(op, "pool", ["x"], ["p"], attrs), [Node("Relu", "act", ["p"], ["y"])], ["y"])
        assert fuse_activation(graph).changes == []


def test_a_fused_pool_without_activation_takes_one() -> None:
    pool = Node("FusedMaxPool", "pool", ["x"], ["p"], FusedMaxPoolAttrs(kernel_shape=(2, 2)))
    graph = pool_graph(pool, [Node("Relu", "act", ["p"], ["y"])], ["y"])
    (fused,) = fuse_activation(graph).graph.nodes
    assert fused.op == "FusedMaxPool" and fused.attrs.activation == "relu" and fused.outputs == ["y"]
