"""Every zoo builder makes a valid ONNX model that edgecnn and onnxruntime agree on (small variants),
with the layer structure of the architecture it is named after."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest

import edgecnn
from edgecnn.bench.builder import Chw, NetBuilder, conv_out
from edgecnn.bench.zoo import MODELS, ZOO_VERSION, Scale, alexnet, build_model, model_path
from edgecnn.errors import InputError
from onnx_support import run_onnxruntime

SMALL = {"width": 0.125, "resolution": 64}  # every zoo builder at a fraction of its real cost


def small_input(name: str, batch: int = 1) -> np.ndarray:
    entry = MODELS[name]
    side = entry.resolution if entry.build is None or entry.channels == 1 else SMALL["resolution"]
    return np.random.default_rng(1).standard_normal((batch, entry.channels, side, side), dtype=np.float32)


def small_model(name: str) -> onnx.ModelProto:
    resolution = None if MODELS[name].channels == 1 else SMALL["resolution"]
    return build_model(name, SMALL["width"], resolution)


@pytest.mark.parametrize("name", list(MODELS))
def test_small_variant_is_valid_onnx_and_matches_onnxruntime(name: str, zoo_cache: Path) -> None:
    resolution = None if MODELS[name].channels == 1 else SMALL["resolution"]
    path = model_path(name, zoo_cache, SMALL["width"], resolution)
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    x = small_input(name)
    want = run_onnxruntime(model, {"input": x})[0]
    got = edgecnn.load(path, threads=1)(x)
    assert got.shape == want.shape
    assert np.all(np.isfinite(want)) and np.abs(want).max() > 0
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()


def test_models_take_a_symbolic_batch_and_opset_17(zoo_cache: Path) -> None:
    model = small_model("resnet18")
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "N" and [d.dim_value for d in dims[1:]] == [3, 64, 64]
    assert model.opset_import[0].version == 17 and model.graph.output[0].name == "output"
    x = small_input("resnet18", batch=3)
    assert edgecnn.load(model_path("resnet18", zoo_cache, SMALL["width"], 64), threads=1)(x).shape == (
        3,
        1000,
    )


def op_counts(model: onnx.ModelProto) -> Counter[str]:
    return Counter(n.op_type for n in model.graph.node)


def conv_groups(model: onnx.ModelProto) -> list[int]:
    groups = []
    for node in model.graph.node:
        if node.op_type == "Conv":
            groups.append(next((a.i for a in node.attribute if a.name == "group"), 1))
    return groups


@pytest.mark.parametrize(
    ("name", "convs", "gemms", "extra"),
    [
        ("alexnet", 5, 3, {"LRN": 2}),
        ("googlenet", 57, 1, {"LRN": 2, "Concat": 9}),
        ("resnet18", 20, 1, {"BatchNormalization": 20, "Add": 8}),
        ("resnet50", 53, 1, {"BatchNormalization": 53, "Add": 16}),
        ("squeezenet1.1", 26, 0, {"Concat": 8}),
        ("mobilenetv2", 52, 1, {"Clip": 35, "Add": 10}),
        ("shufflenetv2", 56, 1, {"Split": 13, "Transpose": 16}),
        ("vgg16", 13, 3, {"MaxPool": 5}),
        ("tiny-yolo", 9, 3, {"LeakyRelu": 10, "MaxPool": 6}),
        ("lenet5", 2, 3, {"MaxPool": 2}),
    ],
)
def test_architecture_layer_counts(name: str, convs: int, gemms: int, extra: dict[str, int]) -> None:
    counts = op_counts(
        build_model(name, 0.5, None if MODELS[name].channels == 1 else 64)
    )  # 0.125 merges stages
    assert counts["Conv"] == convs and counts["Gemm"] == gemms
    for op, count in extra.items():
        assert counts[op] == count, op


def test_grouped_and_depthwise_convolutions() -> None:
    assert conv_groups(small_model("alexnet")) == [1, 2, 1, 2, 2]
    mobilenet = small_model("mobilenetv2")
    depthwise = [n for n in mobilenet.graph.node if n.op_type == "Conv" and conv_groups_of(n) > 1]
    assert len(depthwise) == 17


def conv_groups_of(node: onnx.NodeProto) -> int:
    return next((a.i for a in node.attribute if a.name == "group"), 1)


def test_tiny_yolo_keeps_its_7x7_grid_and_1470_outputs() -> None:
    """At 448x448, six 2x2 pools leave 7x7: the first FC reads channels x 49 (50176 at full width)."""
    model = build_model("tiny-yolo", width=1 / 16)
    weights = {t.name: t for t in model.graph.initializer}
    gemms = [n for n in model.graph.node if n.op_type == "Gemm"]
    assert list(weights[gemms[0].input[1]].dims) == [16, 64 * 7 * 7]
    assert list(weights[gemms[2].input[1]].dims) == [1470, 256]


def test_alexnet_full_size_geometry() -> None:
    """227 -> 55 -> 27 -> 13 -> 6 with Caffe's ceil-mode pooling: FC6 reads 256 x 6 x 6."""
    builder = NetBuilder("alexnet", Chw(3, 227, 227), seed=0)
    alexnet(builder, Scale(width=1 / 32))
    pools = [builder.shapes[n.output[0]] for n in builder.nodes if n.op_type == "MaxPool"]
    assert [(p.height, p.width) for p in pools] == [(27, 27), (13, 13), (6, 6)]


def test_conv_out_follows_onnx_ceil_mode() -> None:
    assert conv_out(55, 3, 2, 0) == 27 and conv_out(14, 3, 2, 0, ceil_mode=True) == 7
    assert conv_out(14, 3, 2, 0) == 6
    assert conv_out(5, 2, 2, 1, ceil_mode=True) == 3  # a last window starting in the padding is dropped
    with pytest.raises(ValueError, match="does not fit"):
        conv_out(2, 5, 1, 0)


def test_weights_are_seeded() -> None:
    a, b, c = (build_model("lenet5", 0.5, seed=s) for s in (0, 0, 1))
    assert a.graph.initializer[0] == b.graph.initializer[0]
    assert a.graph.initializer[0] != c.graph.initializer[0]


def test_model_path_caches_by_parameters(tmp_path: Path) -> None:
    first = model_path("lenet5", tmp_path, 0.5)
    stamp = first.stat().st_mtime_ns
    assert model_path("lenet5", tmp_path, 0.5) == first and first.stat().st_mtime_ns == stamp
    assert first.name == f"lenet5-w0.5-r28-s0-v{ZOO_VERSION}.onnx"
    assert model_path("lenet5", tmp_path, 0.5, seed=1) != first
    assert not list(tmp_path.glob("*.tmp"))


def test_simplecnn_is_the_bundled_file_with_a_fixed_batch(tmp_path: Path) -> None:
    path = model_path("simplecnn", tmp_path)
    assert path.name == "face_binary_cls.onnx" and path.exists()
    assert MODELS["simplecnn"].fixed_batch == 1 and not list(tmp_path.iterdir())


def test_unknown_model_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"unknown benchmark model 'resnet1000'.*alexnet"):
        model_path("resnet1000", tmp_path)
