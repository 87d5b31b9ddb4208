"""`compare_layers` finds a planted single-layer error at the layer it was planted in, against each
engine, and passes the same model when nothing was planted."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgecnn.compare import compare_layers
from edgecnn.errors import ConfigurationError
from edgecnn.importers.caffe import write_random_caffemodel
from edgecnn.importers.caffe.schema import NetParameter
from edgecnn.importers.darknet import write_random_weights
from edgecnn.ir.graph import Node

FIXTURES = Path(__file__).parent.parent / "fixtures"
ONNX_ENGINES = ["onnxruntime", "opencv", "reference"]


def onnx_model(path: Path, bump: float = 0.0) -> Path:
    """conv-relu-conv-relu-maxpool-gemm-sigmoid on a 1x3x12x12 input; ``bump`` is added to one
    weight of the second convolution (the planted error). The second conv's node has no name, as
    exporters often write them."""
    rng = np.random.default_rng(7)
    w1 = rng.standard_normal((6, 3, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((8, 6, 3, 3)).astype(np.float32) * 0.3
    w2[2, 1, 1, 1] += bump
    fc = rng.standard_normal((4, 8 * 6 * 6)).astype(np.float32) * 0.1
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc"], ["g"], name="fc", transB=1),
        helper.make_node("Sigmoid", ["g"], ["y"], name="sigmoid"),
    ]
    graph = helper.make_graph(
        nodes,
        "planted",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(w, n) for w, n in ((w1, "w1"), (w2, "w2"), (fc, "fc"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("against", ONNX_ENGINES)
def test_onnx_model_agrees(tmp_path: Path, against: str) -> None:
    model = onnx_model(tmp_path / "m.onnx")
    result = compare_layers(model, against, optimize=False, threads=1)
    assert [row.tensor for row in result.layers] == ["c1", "r1", "c2", "r2", "p2", "f", "g", "y"]
    assert result.first_over is None
    assert all(row.diff is not None and row.diff.cosine > 0.9999 for row in result.layers)


@pytest.mark.parametrize("against", ONNX_ENGINES)
def test_planted_error_is_found_at_its_layer(tmp_path: Path, against: str) -> None:
    model = onnx_model(tmp_path / "m.onnx")
    planted = onnx_model(tmp_path / "planted.onnx", bump=0.5)
    result = compare_layers(model, against, peer_model=planted, optimize=False, threads=1)
    first = result.first_over
    assert first is not None and first.tensor == "c2" and first.op == "Conv"
    assert [row.status for row in result.layers[:2]] == ["ok", "ok"]


def test_optimised_graph_hides_fused_tensors(tmp_path: Path) -> None:
    """Fusion removes the convolutions' own outputs: they are listed as hidden, and the error shows
    at the fused layer's output."""
    model = onnx_model(tmp_path / "m.onnx")
    planted = onnx_model(tmp_path / "planted.onnx", bump=0.5)
    result = compare_layers(model, "onnxruntime", peer_model=planted, threads=1)
    assert set(result.hidden) >= {"c1", "c2"}
    assert "c2" not in [row.tensor for row in result.layers]
    first = result.first_over
    assert first is not None and first.tensor == "r2" and first.op.startswith("Fused")


def test_near_zero_sigmoid_map_is_not_a_failure(tmp_path: Path) -> None:
    """A sigmoid of very negative values: relative differences are large, absolute ones are not."""
    model = onnx_model(tmp_path / "m.onnx")
    x = np.full((1, 3, 12, 12), -40.0, np.float32)
    result = compare_layers(model, "onnxruntime", feeds={"x": x}, optimize=False, threads=1)
    assert result.first_over is None
    sigmoid = result.layers[-1]
    assert sigmoid.tensor == "y" and sigmoid.diff is not None and sigmoid.diff.max_rel > 1e-3


def caffemodel_with_bump(prototxt: Path, out: Path, layer: str, bump: float) -> None:
    write_random_caffemodel(prototxt, out, seed=1)
    net = NetParameter()
    net.ParseFromString(out.read_bytes())
    (entry,) = [e for e in net.layer if e.name == layer]
    entry.blobs[0].data[3] += bump
    out.write_bytes(net.SerializeToString())


def test_caffe_planted_error_against_opencv(tmp_path: Path) -> None:
    prototxt = FIXTURES / "caffe" / "lenet.deploy.prototxt"
    weights, planted = tmp_path / "lenet.caffemodel", tmp_path / "planted.caffemodel"
    write_random_caffemodel(prototxt, weights, seed=1)
    clean = compare_layers(prototxt, "opencv", weights=weights, optimize=False, threads=1)
    assert [row.layer for row in clean.layers][:4] == ["conv1", "pool1", "conv2", "pool2"]
    assert clean.first_over is None
    caffemodel_with_bump(prototxt, planted, "conv2", 1.0)
    result = compare_layers(
        prototxt, "opencv", weights=weights, peer_weights=planted, optimize=False, threads=1
    )
    assert result.first_over is not None and result.first_over.layer == "conv2"


DARKNET_CFG = """[net]
width=16
height=16
channels=3

[convolutional]
batch_normalize=1
filters=4
size=3
stride=1
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=leaky

[avgpool]
"""


def test_darknet_planted_error_against_opencv(tmp_path: Path) -> None:
    """The bias of the second convolution (batch norm's beta in Darknet) is bumped: its conv matches,
    its batch norm does not."""
    cfg = tmp_path / "net.cfg"
    cfg.write_text(DARKNET_CFG)
    weights = tmp_path / "net.weights"
    write_random_weights(cfg, weights, seed=2)
    clean = compare_layers(cfg, "opencv", weights=weights, optimize=False, threads=1)
    assert [row.peer_name for row in clean.layers] == [
        "conv_0", "bn_0", "leaky_1", "pool_1", "conv_2", "bn_2", "leaky_3", "avgpool_3",
    ]  # fmt: skip
    assert clean.first_over is None
    data = bytearray(weights.read_bytes())
    floats = 4 * 4 + 4 * 3 * 9 + 8 * 4 + 8 * 4 * 9  # every parameter of the two conv layers
    first_bias = len(data) - 4 * floats + 4 * (4 * 4 + 4 * 3 * 9)
    data[first_bias : first_bias + 4] = np.float32(5.0).tobytes()
    planted = tmp_path / "planted.weights"
    planted.write_bytes(bytes(data))
    result = compare_layers(cfg, "opencv", weights=weights, peer_weights=planted, optimize=False, threads=1)
    assert result.first_over is not None and result.first_over.tensor == "layer2.convolutional.bn"


def test_engine_that_cannot_read_the_format(tmp_path: Path) -> None:
    cfg = tmp_path / "net.cfg"
    cfg.write_text(DARKNET_CFG)
    weights = tmp_path / "net.weights"
    write_random_weights(cfg, weights)
    with pytest.raises(ConfigurationError, match="--peer-model"):
        compare_layers(cfg, "onnxruntime", weights=weights)
    with pytest.raises(ConfigurationError, match="unknown engine"):
        compare_layers(cfg, "tensorrt", weights=weights)


def test_ecnn_against_its_onnx_original(tmp_path: Path) -> None:
    """A converted model keeps its tensor names, so it can be compared with the file it came from."""
    import edgecnn

    model = onnx_model(tmp_path / "m.onnx")
    converted = tmp_path / "m.ecnn"
    edgecnn.load(model).save(converted)
    shutil.copy(model, tmp_path / "copy.onnx")
    result = compare_layers(converted, "onnxruntime", peer_model=tmp_path / "copy.onnx", optimize=False)
    assert len(result.layers) == 8 and result.first_over is None


def test_initializers_listed_as_inputs(tmp_path: Path) -> None:
    """Older exporters list the weights among the graph inputs: neither engine asks for them."""
    path = onnx_model(tmp_path / "m.onnx")
    model = onnx.load(path)
    model.graph.input.extend(
        helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.dims))
        for t in model.graph.initializer
    )
    onnx.save(model, path)
    result = compare_layers(path, "onnxruntime", optimize=False, threads=1)
    assert len(result.layers) == 8 and result.first_over is None


def test_missing_engine_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "cv2" else find_spec(name, *a)
    )
    with pytest.raises(ConfigurationError, match=r"pip install 'edgecnn\[compare\]'"):
        compare_layers(onnx_model(tmp_path / "m.onnx"), "opencv")


def test_faulty_compiled_kernel_found_against_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CPU kernel chosen for the second convolution adds 0.01 to its output; the reference
    kernels do not: the first layer over tolerance is that convolution."""
    import edgecnn.runtime.plan as plan_module
    from edgecnn.kernels.registry import KernelChoice

    select_kernel = plan_module.select_kernel

    def faulty(node: Node, *args: Any, backend: str, **kwargs: Any) -> KernelChoice:
        choice = select_kernel(node, *args, backend=backend, **kwargs)
        if backend != "cpu" or node.name != "Conv_2":
            return choice
        return KernelChoice(f"{choice.name}+fault", lambda *xs: choice.run(*xs) + np.float32(0.01))

    monkeypatch.setattr(plan_module, "select_kernel", faulty)
    result = compare_layers(onnx_model(tmp_path / "m.onnx"), "reference", optimize=False, threads=1)
    assert result.first_over is not None and result.first_over.tensor == "c2"
    assert [row.status for row in result.layers[:2]] == ["ok", "ok"]
