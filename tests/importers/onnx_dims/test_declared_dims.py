"""ONNX as exporters write it: unknown dimensions named '?', left empty or written as -1, one name
reused on unrelated axes; and opsets outside the tested range load with a warning."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgecnn
from edgecnn.errors import EdgeCNNError, InputError
from edgecnn.importers.onnx.reader import OnnxOpsetWarning


def value_info(name: str, dims: list[int | str | None]) -> onnx.ValueInfoProto:
    """A float tensor whose dims are a value (-1 allowed), a name, or None (neither field set)."""
    info = helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
    shape = info.type.tensor_type.shape
    for d in dims:
        dim = shape.dim.add()
        if isinstance(d, int):
            dim.dim_value = d
        elif isinstance(d, str):
            dim.dim_param = d
    return info


def save(graph: onnx.GraphProto, path: Path, opset: int = 13) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def paddle_style_conv(tmp_path: Path) -> Path:
    """Paddle2ONNX declares an image input as [-1, 3, ?, ?]."""
    weights = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32), "w"
    )
    node = helper.make_node("Conv", ["image", "w"], ["features"], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [node],
        "paddle",
        [value_info("image", [-1, 3, "?", "?"])],
        [value_info("features", [-1, 4, "?", "?"])],
        [weights],
    )
    return save(graph, tmp_path / "paddle.onnx")


def test_question_mark_dims_take_any_size_like_onnxruntime(tmp_path: Path) -> None:
    path = paddle_style_conv(tmp_path)
    image = np.random.default_rng(1).standard_normal((1, 3, 48, 192)).astype(np.float32)
    got = edgecnn.load(path).run({"image": image})["features"]
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"image": image})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dim", ["N", "?", None, -1])
def test_one_declared_dim_on_two_independent_inputs_binds_nothing(
    tmp_path: Path, dim: int | str | None
) -> None:
    nodes = [helper.make_node("Relu", ["a"], ["ra"]), helper.make_node("Relu", ["b"], ["rb"])]
    inputs = [value_info("a", [dim, 2]), value_info("b", [dim, 2])]
    graph = helper.make_graph(nodes, "two", inputs, [value_info("ra", [dim, 2]), value_info("rb", [dim, 2])])
    model = edgecnn.load(save(graph, tmp_path / "two.onnx"))
    out = model.run({"a": -np.ones((2, 2), np.float32), "b": np.ones((3, 2), np.float32)})
    assert out["ra"].shape == (2, 2) and out["rb"].shape == (3, 2)
    np.testing.assert_array_equal(out["rb"], 1.0)


def test_sizes_the_graph_needs_equal_are_still_checked(tmp_path: Path) -> None:
    node = helper.make_node("Add", ["a", "b"], ["sum"])
    graph = helper.make_graph(
        [node], "add", [value_info("a", ["N", 2]), value_info("b", ["N", 2])], [value_info("sum", ["N", 2])]
    )
    model = edgecnn.load(save(graph, tmp_path / "add.onnx"))
    with pytest.raises(EdgeCNNError, match="Add"):
        model.run({"a": np.ones((2, 2), np.float32), "b": np.ones((3, 2), np.float32)})


def test_fixed_dims_are_still_checked(tmp_path: Path) -> None:
    model = edgecnn.load(paddle_style_conv(tmp_path))
    with pytest.raises(InputError, match="axis 1"):
        model.run({"image": np.ones((1, 4, 8, 8), np.float32)})


def relu_model(tmp_path: Path, opset: int) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu", [value_info("x", [1, 3])], [value_info("y", [1, 3])]
    )
    return save(graph, tmp_path / f"relu{opset}.onnx", opset)


@pytest.mark.parametrize("opset", [6, 22, 23])
def test_untested_opsets_warn_and_load(tmp_path: Path, opset: int) -> None:
    with pytest.warns(OnnxOpsetWarning, match=f"opset {opset} is outside the tested range"):
        model = edgecnn.load(relu_model(tmp_path, opset))
    np.testing.assert_array_equal(model.run({"x": np.array([[-1, 0, 2]], np.float32)})["y"], [[0, 0, 2]])


def test_tested_opsets_load_silently(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", OnnxOpsetWarning)
        edgecnn.load(relu_model(tmp_path, 13))
