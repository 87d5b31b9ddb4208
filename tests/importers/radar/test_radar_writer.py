"""save_radar: graphs of the family in other spellings are written; others are refused by node."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from edgecnn.errors import ModelFormatError
from edgecnn.importers.radar import load_radar, save_radar
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.activation import SoftmaxAttrs
from edgecnn.ops.common import AutoPad
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import FlattenAttrs
from importers.radar.radar_spec import PATENT_FILE, PATENT_LENGTH, reference_forward


def node(graph: Graph, name: str) -> Node:
    return next(n for n in graph.nodes if n.name == name)


def outputs(graph: Graph, x: np.ndarray) -> np.ndarray:
    return Model(graph).run({"input": x})[graph.outputs[0]]


def test_other_spellings_of_the_family_are_written(tmp_path: Path, patent_layers) -> None:
    """Gemm with trans_b, alpha, beta and a (1, n) bias; Conv without bias; SAME-free auto_pad VALID."""
    graph = load_radar(PATENT_FILE)
    init = graph.initializers
    fc2, fc3 = node(graph, "layer2.fc"), node(graph, "layer3.fc")
    init["layer2.weight"] = np.ascontiguousarray(init["layer2.weight"].T / np.float32(2))
    fc2.attrs = GemmAttrs(alpha=2.0, trans_b=True)
    init["layer3.bias"] = init["layer3.bias"].reshape(1, 10) / np.float32(4)
    fc3.attrs = GemmAttrs(beta=4.0)
    conv0 = node(graph, "layer0.conv")
    conv0.inputs = conv0.inputs[:2]
    conv0.attrs = ConvAttrs(auto_pad=AutoPad.VALID)
    save_radar(graph, tmp_path / "net.bin")
    again = load_radar(tmp_path / "net.bin")
    x = np.random.default_rng(0).standard_normal((4, 1, PATENT_LENGTH)).astype(np.float32)
    np.testing.assert_allclose(outputs(again, x), outputs(graph, x), rtol=1e-5, atol=1e-7)
    patent_layers = [replace(layer) for layer in patent_layers]
    patent_layers[0].bias = np.zeros(6, np.float32)
    np.testing.assert_allclose(
        outputs(again, x), reference_forward(patent_layers, x)[1], rtol=1e-5, atol=1e-7
    )


def small_graph() -> Graph:
    """input (N, 2, 12) -> Conv k3 -> MaxPool 2/2 -> Relu -> Flatten -> Gemm 10->4 -> Softmax."""
    rng = np.random.default_rng(0)
    nodes = [
        Node("Conv", "conv", ["input", "w", "b"], ["c"], ConvAttrs(kernel_shape=(3,))),
        Node("MaxPool", "pool", ["c"], ["p"], MaxPoolAttrs(kernel_shape=(2,), strides=(2,))),
        Node("Relu", "relu", ["p"], ["r"], NoAttrs()),
        Node("Flatten", "flatten", ["r"], ["f"], FlattenAttrs(axis=1)),
        Node("Gemm", "fc", ["f", "fw", "fb"], ["z"], GemmAttrs()),
        Node("Softmax", "softmax", ["z"], ["y"], SoftmaxAttrs(axis=1)),
    ]
    init = {
        "w": rng.standard_normal((2, 2, 3)).astype(np.float32),
        "b": rng.standard_normal(2).astype(np.float32),
        "fw": rng.standard_normal((10, 4)).astype(np.float32),
        "fb": rng.standard_normal(4).astype(np.float32),
    }
    return Graph([TensorSpec("input", "float32", ("N", 2, 12))], ["y"], nodes, init, name="small")


def test_small_graph_round_trips(tmp_path: Path) -> None:
    graph = small_graph()
    save_radar(Model(graph), tmp_path / "small.bin")
    again = load_radar(tmp_path / "small.bin", input_length=12)
    x = np.random.default_rng(1).standard_normal((3, 2, 12)).astype(np.float32)
    np.testing.assert_array_equal(outputs(again, x), outputs(graph, x))


def edit_attrs(name: str, attrs: object):
    def edit(graph: Graph) -> None:
        node(graph, name).attrs = attrs

    return edit


def swap_op(name: str, op: str, attrs: object = None):
    def edit(graph: Graph) -> None:
        n = node(graph, name)
        n.op, n.attrs = op, attrs if attrs is not None else n.attrs

    return edit


def relu_before_pool(graph: Graph) -> None:
    conv, pool, relu = (node(graph, n) for n in ("conv", "pool", "relu"))
    relu.inputs, relu.outputs, pool.inputs, pool.outputs = ["c"], ["q"], ["q"], ["r"]
    graph.nodes = [conv, relu, pool, *graph.nodes[3:]]


def branch(graph: Graph) -> None:
    graph.nodes.append(Node("Relu", "extra", ["p"], ["p2"], NoAttrs()))


def second_output(graph: Graph) -> None:
    graph.outputs.append("z")


def weights_from_node(graph: Graph) -> None:
    graph.nodes.insert(0, Node("Identity", "copy", ["w_src"], ["w"], NoAttrs()))
    graph.initializers["w_src"] = graph.initializers.pop("w")


def symbolic_length(graph: Graph) -> None:
    graph.inputs = [TensorSpec("input", "float32", ("N", 2, "L"))]


def wrong_features(graph: Graph) -> None:
    graph.initializers["fw"] = np.zeros((11, 4), np.float32)


def no_softmax(graph: Graph) -> None:
    graph.nodes.pop()
    graph.outputs = ["z"]


@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        (edit_attrs("conv", ConvAttrs(strides=(2,))), r"node conv \(Conv\): only unpadded stride-1"),
        (edit_attrs("conv", ConvAttrs(pads=(1, 1))), r"node conv \(Conv\): only unpadded"),
        (edit_attrs("conv", ConvAttrs(auto_pad=AutoPad.SAME_UPPER)), r"node conv \(Conv\)"),
        (
            edit_attrs("pool", MaxPoolAttrs(kernel_shape=(2,), ceil_mode=True)),
            r"node pool \(MaxPool\): only unpadded floor",
        ),
        (
            swap_op("pool", "AveragePool", AveragePoolAttrs(kernel_shape=(2,), pads=(1, 1))),
            r"node pool \(AveragePool\): only",
        ),
        (
            swap_op("relu", "Sigmoid"),
            r"node relu \(Sigmoid\): a convolution \(and its pooling\) must be followed by Relu",
        ),
        (
            swap_op("softmax", "LogSoftmax"),
            r"node softmax \(LogSoftmax\): a fully connected layer must be followed",
        ),
        (
            edit_attrs("softmax", SoftmaxAttrs(axis=0)),
            r"node softmax \(Softmax\): must normalise over the features",
        ),
        (edit_attrs("flatten", FlattenAttrs(axis=2)), r"node flatten \(Flatten\): must flatten from axis 1"),
        (
            edit_attrs("fc", GemmAttrs(trans_a=True)),
            r"node fc \(Gemm\): needs a constant 2-D B and trans_a = 0",
        ),
        (relu_before_pool, r"node pool \(MaxPool\): pooling must come between a convolution and its Relu"),
        (branch, r"node pool \(MaxPool\): output 'p': 2 nodes read it"),
        (second_output, r"needs one input and one output, has 1 and 2"),
        (weights_from_node, r"node conv \(Conv\): input 'w' must be a constant"),
        (symbolic_length, r"input input: float32\[N, 2, L\] must be float32 \(N, channels, length\)"),
        (wrong_features, r"node fc \(Gemm\): expects 11 inputs, the previous layer gives 10"),
        (no_softmax, r"node fc \(Gemm\): a fully connected layer must be followed by Relu, or Softmax"),
    ],
)
def test_graphs_outside_the_family_are_refused(tmp_path: Path, edit, pattern: str) -> None:
    graph = small_graph()
    edit(graph)
    with pytest.raises(ModelFormatError, match="cannot save graph 'small' in the radar format: .*" + pattern):
        save_radar(graph, tmp_path / "out.bin")
    assert not (tmp_path / "out.bin").exists()


def test_not_a_graph() -> None:
    with pytest.raises(TypeError, match="needs a Graph or a Model, got str"):
        save_radar("net.onnx", "out.bin")
