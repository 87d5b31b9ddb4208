"""Before/after tests of the folding and fusion passes: BatchNormalization and per-channel Mul/Add
folded into the conv/dense layer before them, activations fused into it. Every rewrite must leave
the model's outputs as they were; every pattern that does not qualify must be left alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgecnn.importers.caffe import load_caffe
from edgecnn.importers.darknet import load_darknet
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.activation import LeakyReluAttrs
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import FusedConvAttrs
from edgecnn.ops.norm import BatchNormalizationAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.passes import PIPELINE, optimize
from edgecnn.passes.fold_batch_norm import fold_batch_norm
from edgecnn.passes.fold_channel_affine import channel_vector, fold_channel_affine
from edgecnn.passes.fuse_activation import fuse_activation
from edgecnn.runtime.options import RuntimeOptions

REPO = Path(__file__).resolve().parents[2]
DARKNET = REPO / "tests" / "fixtures" / "darknet"
NETS = Path(__file__).resolve().parent / "nets"


# ------------------------------------------------------------------ helpers
def random(shape: tuple[int, ...], seed: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def ops_after(graph: Graph) -> list[tuple[str, str]]:
    optimized, _ = optimize(graph.topologically_sorted())
    return [(n.op, n.name) for n in optimized.nodes]


def assert_outputs_unchanged(graph: Graph, feeds: dict[str, np.ndarray], rtol: float = 1e-5) -> None:
    """The optimised model gives the unoptimised one's outputs (relative to each output's scale)."""
    fast = Model(graph).run(feeds)
    plain = Model(graph, RuntimeOptions.resolve(optimize=False)).run(feeds)
    assert fast.keys() == plain.keys()
    for name, expected in plain.items():
        assert fast[name].dtype == expected.dtype and fast[name].shape == expected.shape, name
        scale = float(np.max(np.abs(expected), initial=0.0))
        np.testing.assert_allclose(fast[name], expected, rtol=rtol, atol=rtol * scale, err_msg=name)


def image_input(shape: tuple[int, ...] = (2, 3, 6, 7)) -> list[TensorSpec]:
    return [TensorSpec("x", "float32", shape)]


def bn_node(name: str, x: str, y: str, epsilon: float = 1e-5) -> Node:
    params = [f"{name}.{role}" for role in ("scale", "bias", "mean", "var")]
    return Node("BatchNormalization", name, [x, *params], [y], BatchNormalizationAttrs(epsilon))


def bn_params(name: str, channels: int, seed: int) -> dict[str, np.ndarray]:
    return {
        f"{name}.scale": random((channels,), seed, 0.5, 2.0),
        f"{name}.bias": random((channels,), seed + 1),
        f"{name}.mean": random((channels,), seed + 2),
        f"{name}.var": random((channels,), seed + 3, 0.1, 3.0),
    }


def conv_graph(
    after: list[Node], extra: dict[str, np.ndarray], outputs: list[str], bias: bool = False
) -> Graph:
    """x (2, 3, 6, 7) -> conv (4 channels, 3x3, pad 1) -> ``after``."""
    initializers = {"w": random((4, 3, 3, 3), 10), **extra}
    inputs = ["x", "w"]
    if bias:
        initializers["b"] = random((4,), 11)
        inputs.append("b")
    conv = Node("Conv", "conv", inputs, ["c"], ConvAttrs(pads=(1, 1, 1, 1)))
    return Graph(image_input(), outputs, [conv, *after], initializers)


FEEDS = {"x": random((2, 3, 6, 7), 0)}


# ------------------------------------------------------------ BatchNormalization
@pytest.mark.parametrize("bias", [False, True])
def test_batch_norm_folds_into_conv(bias: bool) -> None:
    graph = conv_graph([bn_node("bn", "c", "y")], bn_params("bn", 4, 20), ["y"], bias=bias)
    result = fold_batch_norm(graph)
    assert [(n.op, n.name) for n in result.graph.nodes] == [("Conv", "conv")]
    conv = result.graph.nodes[0]
    assert conv.outputs == ["y"] and len(conv.inputs) == 3  # a bias was created when absent
    assert result.changes == ["folded bn (BatchNormalization) into conv (Conv)"]
    assert result.graph.initializers["w"] is graph.initializers["w"]  # old weights left for eliminate_dead
    assert conv.inputs[1] != "w" and result.graph.initializers[conv.inputs[1]].dtype == np.float32
    assert ops_after(graph) == [("Conv", "conv")]
    assert_outputs_unchanged(graph, FEEDS)


def test_batch_norm_folds_into_grouped_conv_and_fused_conv_without_activation() -> None:
    weights = {"w": random((6, 1, 3, 3), 12), **bn_params("bn", 6, 30)}
    for op, attrs in [
        ("Conv", ConvAttrs(group=3, strides=(2, 1))),
        ("FusedConv", FusedConvAttrs(group=3, strides=(2, 1))),
    ]:
        conv = Node(op, "conv", ["x", "w"], ["c"], attrs)
        graph = Graph(image_input(), ["y"], [conv, bn_node("bn", "c", "y")], weights)
        assert ops_after(graph) == [(op, "conv")]
        assert_outputs_unchanged(graph, FEEDS)


@pytest.mark.parametrize(
    ("trans_b", "alpha", "beta", "c_shape"),
    [
        (False, 1.0, 1.0, None),
        (True, 1.0, 1.0, (5,)),
        (True, 0.5, 2.0, (1, 5)),
        (False, 2.0, -0.5, ()),
        (True, 1.0, 0.25, (1, 1)),
    ],
)
def test_batch_norm_folds_into_gemm(
    trans_b: bool, alpha: float, beta: float, c_shape: tuple[int, ...] | None
) -> None:
    initializers = {"b": random((5, 8) if trans_b else (8, 5), 40), **bn_params("bn", 5, 41)}
    inputs = ["a", "b"]
    if c_shape is not None:
        initializers["c"] = random(c_shape, 42)
        inputs.append("c")
    gemm = Node("Gemm", "fc", inputs, ["g"], GemmAttrs(alpha=alpha, beta=beta, trans_b=trans_b))
    graph = Graph([TensorSpec("a", "float32", (3, 8))], ["y"], [gemm, bn_node("bn", "g", "y")], initializers)
    result = fold_batch_norm(graph)
    assert [(n.op, n.name) for n in result.graph.nodes] == [("Gemm", "fc")]
    assert result.graph.nodes[0].attrs.beta == 1.0
    assert_outputs_unchanged(graph, {"a": random((3, 8), 43)})


def test_gemm_whose_bias_varies_over_rows_is_left_alone() -> None:
    initializers = {"b": random((8, 5), 40), "c": random((3, 5), 41), **bn_params("bn", 5, 42)}
    gemm = Node("Gemm", "fc", ["a", "b", "c"], ["g"], GemmAttrs())
    graph = Graph([TensorSpec("a", "float32", (3, 8))], ["y"], [gemm, bn_node("bn", "g", "y")], initializers)
    assert fold_batch_norm(graph).changes == []


def test_batch_norm_is_left_alone_when_not_foldable() -> None:
    params = bn_params("bn", 4, 20)
    # the conv output is also read by another node
    twice = conv_graph(
        [bn_node("bn", "c", "y"), Node("Relu", "relu", ["c"], ["r"], NoAttrs())], params, ["y", "r"]
    )
    # the conv output is a graph output
    exposed = conv_graph([bn_node("bn", "c", "y")], params, ["y", "c"])
    # the weights are not constants (a second graph input)
    variable = conv_graph([bn_node("bn", "c", "y")], params, ["y"])
    variable.inputs.append(TensorSpec("w", "float32", (4, 3, 3, 3)))
    del variable.initializers["w"]
    # the statistics are not constants
    computed = conv_graph(
        [Node("Relu", "mean_relu", ["m"], ["bn.mean"], NoAttrs()), bn_node("bn", "c", "y")],
        {k: v for k, v in params.items() if k != "bn.mean"},
        ["y"],
    )
    computed.inputs.append(TensorSpec("m", "float32", (4,)))
    for graph, feeds in [
        (twice, FEEDS),
        (exposed, FEEDS),
        (variable, {**FEEDS, "w": random((4, 3, 3, 3), 1)}),
        (computed, {**FEEDS, "m": random((4,), 2)}),
    ]:
        graph = graph.topologically_sorted()
        assert fold_batch_norm(graph).changes == []
        assert "BatchNormalization" in [op for op, _ in ops_after(graph)]
        assert_outputs_unchanged(graph, feeds)


def test_batch_norm_with_negative_variance_is_left_alone() -> None:
    params = {**bn_params("bn", 4, 20), "bn.var": np.array([1.0, -0.5, 2.0, 1.0], np.float32)}
    assert fold_batch_norm(conv_graph([bn_node("bn", "c", "y")], params, ["y"])).changes == []


def test_batch_norm_after_an_activated_conv_is_left_alone() -> None:
    conv = Node("FusedConv", "conv", ["x", "w"], ["c"], FusedConvAttrs(activation="relu"))
    graph = Graph(
        image_input(),
        ["y"],
        [conv, bn_node("bn", "c", "y")],
        {"w": random((4, 3, 1, 1), 3), **bn_params("bn", 4, 5)},
    )
    assert fold_batch_norm(graph).changes == []


@settings(max_examples=30, deadline=None)
@given(
    channels=st.integers(1, 6),
    per_group=st.integers(1, 3),
    group=st.sampled_from([1, 2]),
    kernel=st.integers(1, 3),
    size=st.integers(3, 7),
    epsilon=st.floats(1e-6, 1e-1),
    seed=st.integers(0, 2**16),
    bias=st.booleans(),
)
def test_batch_norm_fold_keeps_outputs_for_random_shapes(
    channels: int, per_group: int, group: int, kernel: int, size: int, epsilon: float, seed: int, bias: bool
) -> None:
    out_channels = channels * group
    initializers = {
        "w": random((out_channels, per_group, kernel, kernel), seed),
        **bn_params("bn", out_channels, seed + 1),
    }
    initializers["bn.var"] = random((out_channels,), seed + 5, 0.0, 4.0)  # var near 0: epsilon matters
    inputs = ["x", "w"]
    if bias:
        initializers["b"] = random((out_channels,), seed + 6)
        inputs.append("b")
    conv = Node("Conv", "conv", inputs, ["c"], ConvAttrs(group=group, pads=(kernel // 2,) * 4))
    x_shape = (1, per_group * group, size, size + 1)
    graph = Graph(image_input(x_shape), ["y"], [conv, bn_node("bn", "c", "y", epsilon)], initializers)
    assert ops_after(graph) == [("Conv", "conv")]
    assert_outputs_unchanged(graph, {"x": random(x_shape, seed + 7)})


# -------------------------------------------------------- per-channel Mul / Add
def constant_op(op: str, name: str, x: str, constant: str, y: str, constant_first: bool = False) -> Node:
    return Node(op, name, [constant, x] if constant_first else [x, constant], [y], NoAttrs())


@pytest.mark.parametrize(
    ("op", "shape", "constant_first"),
    [
        ("Mul", (4, 1, 1), False),
        ("Mul", (1, 4, 1, 1), True),
        ("Mul", (), False),
        ("Add", (4, 1, 1), True),
        ("Add", (1,), False),
        ("Sub", (1, 4, 1, 1), False),
        ("Div", (4, 1, 1), False),
    ],
)
def test_per_channel_constant_folds_into_conv(op: str, shape: tuple[int, ...], constant_first: bool) -> None:
    node = constant_op(op, "affine", "c", "k", "y", constant_first)
    graph = conv_graph([node], {"k": random(shape, 50, 0.5, 2.0)}, ["y"], bias=True)
    result = fold_channel_affine(graph)
    assert [(n.op, n.name) for n in result.graph.nodes] == [("Conv", "conv")]
    assert result.changes == [f"folded affine ({op}) into conv (Conv)"]
    assert_outputs_unchanged(graph, FEEDS)


def test_constant_that_varies_along_width_is_not_a_channel_constant() -> None:
    # [C] on NCHW broadcasts along W, not C: with W == C it is shape-compatible yet must not fold.
    assert channel_vector(np.ones(4, np.float32), 4, 4) is None
    assert channel_vector(np.ones((4, 1), np.float32), 4, 4) is None  # varies along H
    assert channel_vector(np.ones((2, 4, 1, 1), np.float32), 4, 4) is None  # varies along N
    assert channel_vector(np.ones((1, 1, 4, 1, 1), np.float32), 4, 4) is None  # would add an axis
    assert channel_vector(np.ones(4, np.float32), 2, 4) is not None  # [F] on a dense layer's [M, F]
    initializers = {"w": random((7, 3, 3, 3), 10), "k": random((7,), 51, 0.5, 2.0)}
    conv = Node("Conv", "conv", ["x", "w"], ["c"], ConvAttrs(pads=(1, 1, 1, 1)))
    graph = Graph(image_input(), ["y"], [conv, constant_op("Mul", "by_w", "c", "k", "y")], initializers)
    assert fold_channel_affine(graph).changes == []
    assert ops_after(graph) == [("Conv", "conv"), ("Mul", "by_w")]
    assert_outputs_unchanged(graph, FEEDS)


def test_mul_is_left_alone_when_not_foldable() -> None:
    k = {"k": random((4, 1, 1), 52)}
    read_twice = conv_graph(
        [constant_op("Mul", "m", "c", "k", "y"), Node("Relu", "relu", ["c"], ["r"], NoAttrs())], k, ["y", "r"]
    )
    exposed = conv_graph([constant_op("Mul", "m", "c", "k", "y")], k, ["y", "c"])
    by_tensor = conv_graph([constant_op("Mul", "m", "c", "k", "y")], {}, ["y"])
    by_tensor.inputs.append(TensorSpec("k", "float32", (4, 1, 1)))
    divide_by_zero = conv_graph(
        [constant_op("Div", "m", "c", "k", "y")], {"k": np.zeros((4, 1, 1), np.float32)}, ["y"]
    )
    constant_minus_x = conv_graph([constant_op("Sub", "m", "c", "k", "y", constant_first=True)], k, ["y"])
    for graph in [read_twice, exposed, by_tensor, divide_by_zero, constant_minus_x]:
        assert fold_channel_affine(graph).changes == []
    assert_outputs_unchanged(constant_minus_x, FEEDS)
    assert_outputs_unchanged(by_tensor, {**FEEDS, "k": random((4, 1, 1), 3)})


def test_per_column_constant_folds_into_gemm() -> None:
    initializers = {
        "b": random((5, 8), 60),
        "c": random((5,), 61),
        "k": random((5,), 62),
        "d": random((1, 5), 63),
    }
    nodes = [
        Node("Gemm", "fc", ["a", "b", "c"], ["g"], GemmAttrs(trans_b=True, beta=0.5)),
        constant_op("Mul", "mul", "g", "k", "m"),
        constant_op("Add", "add", "m", "d", "y"),
    ]
    graph = Graph([TensorSpec("a", "float32", (3, 8))], ["y"], nodes, initializers)
    assert ops_after(graph) == [("Gemm", "fc")]
    assert_outputs_unchanged(graph, {"a": random((3, 8), 64)})


def test_conv_bn_mul_add_relu_chain_becomes_one_fused_conv() -> None:
    after = [
        bn_node("bn", "c", "b"),
        constant_op("Mul", "scale", "b", "k", "m"),
        constant_op("Add", "shift", "m", "d", "a"),
        Node("Relu", "relu", ["a"], ["y"], NoAttrs()),
    ]
    extra = {**bn_params("bn", 4, 70), "k": random((4, 1, 1), 71), "d": random((1, 4, 1, 1), 72)}
    graph = conv_graph(after, extra, ["y"])
    optimized, reports = optimize(graph)
    assert [(n.op, n.name, n.outputs) for n in optimized.nodes] == [("FusedConv", "conv", ["y"])]
    changes = {r.name: r.changes for r in reports}
    assert changes["fold_batch_norm"] == ["folded bn (BatchNormalization) into conv (Conv)"]
    assert changes["fold_channel_affine"] == [
        "folded scale (Mul) into conv (Conv)",
        "folded shift (Add) into conv (Conv)",
    ]
    assert changes["fuse_activation"] == ["fused conv (Conv) + relu (Relu) -> FusedConv (relu)"]
    assert set(optimized.initializers) == set(optimized.nodes[0].inputs[1:])  # the old constants are gone
    assert_outputs_unchanged(graph, FEEDS)
    # tensors folded away can still be requested: such a run uses the graph as imported
    np.testing.assert_array_equal(
        Model(graph).run(FEEDS, outputs=["b"])["b"],
        Model(graph, RuntimeOptions.resolve(optimize=False)).run(FEEDS, outputs=["b"])["b"],
    )


# ------------------------------------------------------------------ activations
def clip_bounds(low: float | None, high: float | None) -> tuple[list[str], dict[str, np.ndarray]]:
    names = ["lo" if low is not None else "", "hi" if high is not None else ""]
    values = {n: np.asarray(v, np.float32) for n, v in zip(names, (low, high)) if n}
    while names and not names[-1]:
        names.pop()
    return names, values


ACTIVATION_CASES = {
    "relu": ([Node("Relu", "act", ["c"], ["y"], NoAttrs())], {}),
    "leaky_relu": ([Node("LeakyRelu", "act", ["c"], ["y"], LeakyReluAttrs(0.2))], {}),
    "sigmoid": ([Node("Sigmoid", "act", ["c"], ["y"], NoAttrs())], {}),
    "hard_swish": ([Node("HardSwish", "act", ["c"], ["y"], NoAttrs())], {}),
    "silu": (
        [Node("Sigmoid", "gate", ["c"], ["s"], NoAttrs()), Node("Mul", "act", ["c", "s"], ["y"], NoAttrs())],
        {},
    ),
    "silu_swapped": (
        [Node("Sigmoid", "gate", ["c"], ["s"], NoAttrs()), Node("Mul", "act", ["s", "c"], ["y"], NoAttrs())],
        {},
    ),
}
for _label, _low, _high in [("relu6", 0.0, 6.0), ("clip_low", -0.5, None), ("clip_high", None, 0.3)]:
    _names, _values = clip_bounds(_low, _high)
    ACTIVATION_CASES[_label] = ([Node("Clip", "act", ["c", *_names], ["y"], NoAttrs())], _values)


@pytest.mark.parametrize("case", sorted(ACTIVATION_CASES))
def test_activation_fuses_into_conv(case: str) -> None:
    nodes, constants = ACTIVATION_CASES[case]
    graph = conv_graph(nodes, dict(constants), ["y"], bias=True)
    result = fuse_activation(graph)
    assert [(n.op, n.name, n.outputs) for n in result.graph.nodes] == [("FusedConv", "conv", ["y"])]
    attrs = result.graph.nodes[0].attrs
    assert attrs.pads == (1, 1, 1, 1)
    expected = {"relu6": "clip", "clip_low": "clip", "clip_high": "clip", "silu_swapped": "silu"}.get(
        case, case
    )
    assert attrs.activation == expected
    assert result.changes == [
        f"fused conv (Conv) + {' + '.join(str(n) for n in nodes)} -> FusedConv ({expected})"
    ]
    assert_outputs_unchanged(graph, {"x": random((2, 3, 6, 7), 1, -4.0, 4.0)})


def test_activation_parameters_are_carried() -> None:
    leaky, _ = ACTIVATION_CASES["leaky_relu"]
    assert fuse_activation(conv_graph(leaky, {}, ["y"])).graph.nodes[0].attrs.negative_slope == pytest.approx(
        0.2
    )
    clip, constants = ACTIVATION_CASES["relu6"]
    attrs = fuse_activation(conv_graph(clip, dict(constants), ["y"])).graph.nodes[0].attrs
    assert (attrs.low, attrs.high) == (0.0, 6.0)
    clip, constants = ACTIVATION_CASES["clip_high"]
    attrs = fuse_activation(conv_graph(clip, dict(constants), ["y"])).graph.nodes[0].attrs
    assert attrs.low == -np.inf and attrs.high == pytest.approx(0.3)


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "HardSwish"])
def test_activation_fuses_into_gemm_keeping_its_alpha(op: str) -> None:
    nodes = [
        Node("Gemm", "fc", ["a", "b"], ["g"], GemmAttrs(alpha=0.5, trans_b=True)),
        Node(op, "act", ["g"], ["y"], NoAttrs()),
    ]
    graph = Graph([TensorSpec("a", "float32", (3, 8))], ["y"], nodes, {"b": random((5, 8), 80)})
    result = fuse_activation(graph)
    assert [(n.op, n.name) for n in result.graph.nodes] == [("FusedGemm", "fc")]
    assert result.graph.nodes[0].attrs.alpha == 0.5 and result.graph.nodes[0].attrs.trans_b
    assert_outputs_unchanged(graph, {"a": random((3, 8), 81, -3.0, 3.0)})


def test_leaky_relu_after_gemm_keeps_gemm_alpha_apart_from_the_slope() -> None:
    """FusedGemm holds Gemm's ``alpha`` (a scale) and the activation's ``negative_slope`` apart."""
    nodes = [
        Node("Gemm", "fc", ["a", "b"], ["g"], GemmAttrs(alpha=0.5, trans_b=True)),
        Node("LeakyRelu", "act", ["g"], ["y"], LeakyReluAttrs(0.1)),
    ]
    graph = Graph([TensorSpec("a", "float32", (3, 8))], ["y"], nodes, {"b": random((5, 8), 80)})
    fused = fuse_activation(graph).graph.nodes
    assert [n.op for n in fused] == ["FusedGemm"]
    assert (fused[0].attrs.alpha, fused[0].attrs.negative_slope) == (0.5, pytest.approx(0.1))
    assert_outputs_unchanged(graph, {"a": random((3, 8), 81)})


def test_activation_is_left_alone_when_not_fusible() -> None:
    relu = Node("Relu", "act", ["c"], ["y"], NoAttrs())
    exposed = conv_graph([relu], {}, ["y", "c"])
    read_twice = conv_graph([relu, Node("Sigmoid", "other", ["c"], ["z"], NoAttrs())], {}, ["y", "z"])
    gate_read_twice = conv_graph(
        [*ACTIVATION_CASES["silu"][0], Node("Relu", "r", ["s"], ["z"], NoAttrs())], {}, ["y", "z"]
    )
    gate_exposed = conv_graph(list(ACTIVATION_CASES["silu"][0]), {}, ["y", "s"])
    square = conv_graph([Node("Mul", "sq", ["c", "c"], ["y"], NoAttrs())], {}, ["y"])
    clip_by_tensor = conv_graph([Node("Clip", "act", ["c", "lo"], ["y"], NoAttrs())], {}, ["y"])
    clip_by_tensor.inputs.append(TensorSpec("lo", "float32", ()))
    tanh = conv_graph([Node("Tanh", "act", ["c"], ["y"], NoAttrs())], {}, ["y"])
    for graph in [exposed, read_twice, gate_read_twice, gate_exposed, square, clip_by_tensor, tanh]:
        assert fuse_activation(graph).changes == []
    assert_outputs_unchanged(gate_read_twice, FEEDS)
    assert_outputs_unchanged(clip_by_tensor, {**FEEDS, "lo": np.asarray(0.1, np.float32)})


def test_an_activated_conv_takes_no_second_activation() -> None:
    conv = Node("FusedConv", "conv", ["x", "w"], ["c"], FusedConvAttrs(activation="relu"))
    graph = Graph(
        image_input(),
        ["y"],
        [conv, Node("Sigmoid", "s", ["c"], ["y"], NoAttrs())],
        {"w": random((4, 3, 1, 1), 3)},
    )
    assert fuse_activation(graph).changes == []


def test_pipeline_order() -> None:
    names = [name for name, _ in PIPELINE]
    assert names.index("eliminate_noop") < names.index("fold_batch_norm") < names.index("fold_channel_affine")
    assert names.index("fold_channel_affine") < names.index("fuse_activation") < names.index("eliminate_dead")


# ------------------------------------------------------------------ real graphs
def small_input(graph: Graph, size: int) -> Graph:
    """The same network on a size x size image, so the unoptimised reference run is quick."""
    (spec,) = graph.inputs
    graph.inputs = [TensorSpec(spec.name, spec.dtype, (1, spec.shape[1], size, size))]
    return graph


@pytest.mark.parametrize("cfg", ["yolov3-tiny.cfg", "yolov2-tiny.cfg"])
def test_darknet_bn_and_leaky_disappear(cfg: str) -> None:
    graph = small_input(load_darknet(DARKNET / cfg, random_seed=0), 64)
    counts = {op: sum(n.op == op for n in graph.nodes) for op in ("Conv", "BatchNormalization", "LeakyRelu")}
    model = Model(graph)
    optimized = model.optimized_graph
    producers = optimized.producers()
    ops = [n.op for n in optimized.nodes]
    assert "BatchNormalization" not in ops and "LeakyRelu" not in ops
    assert ops.count("FusedConv") == counts["LeakyRelu"]
    assert ops.count("Conv") + ops.count("FusedConv") == counts["Conv"]
    assert len(optimized.nodes) == len(graph.nodes) - counts["BatchNormalization"] - counts["LeakyRelu"]
    for node in optimized.nodes:
        if node.op == "FusedConv":
            assert node.attrs.activation == "leaky_relu" and node.attrs.negative_slope == pytest.approx(0.1)
        assert all(producers.get(x, node).op != "BatchNormalization" for x in node.inputs)
    assert_outputs_unchanged(graph, {"input": random((1, 3, 64, 64), 5, 0.0, 1.0)}, rtol=1e-4)


def test_caffe_conv_batchnorm_scale_relu_becomes_one_fused_conv() -> None:
    graph = load_caffe(NETS / "conv_bn_scale_relu.prototxt", random_seed=0)
    assert [n.op for n in graph.nodes].count("BatchNormalization") == 1
    model = Model(graph)
    (node,) = model.optimized_graph.nodes
    assert node.op == "FusedConv" and node.attrs.activation == "relu" and node.attrs.strides == (2, 2)
    assert model.optimized_graph.outputs == graph.outputs == node.outputs
    assert_outputs_unchanged(graph, {"data": random((1, 3, 7, 9), 6)})


def test_caffe_batchnorm_scale_after_concat_stays() -> None:
    graph = load_caffe(REPO / "tests" / "importers" / "caffe" / "nets" / "branches.prototxt", random_seed=0)
    assert graph.outputs == ["scaled", "concat"]  # 'concat': the in-place BN + Scale + Dropout branch
    optimized, reports = optimize(graph.topologically_sorted())
    ops = [n.op for n in optimized.nodes]
    assert "BatchNormalization" in ops and "Concat" in ops
    changes = {r.name: r.changes for r in reports}
    assert changes["fold_batch_norm"] == changes["fold_channel_affine"] == changes["fuse_activation"] == []
    assert_outputs_unchanged(graph, {"data": random((1, 6, 4, 4), 7)})
