"""ONNX reader: specs, dynamic dims, external data, constants, and every bad-file error."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgecnn
from edgecnn.errors import InputError, ModelFormatError, ModelNotFoundError, UnsupportedOperatorError


def leaky_model(opset: int = 13, batch: str | int = "batch", **graph_extra) -> onnx.ModelProto:
    node = helper.make_node("LeakyRelu", ["x"], ["y"], name="act", alpha=0.25)
    graph = helper.make_graph(
        [node],
        "leaky",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])],
        **graph_extra,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def save(model: onnx.ModelProto, tmp_path: Path, name: str = "m.onnx") -> Path:
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def test_dynamic_batch_runs_any_size(tmp_path: Path) -> None:
    model = edgecnn.load(save(leaky_model(), tmp_path))
    assert model.inputs[0].shape == ("batch", 4)
    for n in (1, 3, 8):
        x = np.linspace(-1, 1, n * 4, dtype=np.float32).reshape(n, 4)
        np.testing.assert_allclose(model(x), np.where(x > 0, x, 0.25 * x))


def test_wrong_shape_and_dtype_errors_say_expected_and_got(tmp_path: Path) -> None:
    model = edgecnn.load(save(leaky_model(batch=2), tmp_path))
    with pytest.raises(InputError, match=r"expected shape \[2, 4\], got \[3, 4\]"):
        model(np.zeros((3, 4), np.float32))
    with pytest.raises(InputError, match="expected dtype float32, got int32"):
        model(np.zeros((2, 4), np.int32))
    with pytest.raises(InputError, match="unknown input name"):
        model.run({"image": np.zeros((2, 4), np.float32)})


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="not found"):
        edgecnn.load(tmp_path / "absent.onnx")


@pytest.mark.parametrize("content", [b"", b"\x00\x01garbage" * 50, b"not a model at all\n" * 3])
def test_file_that_is_not_a_model(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(ModelFormatError, match=r"bad\.onnx"):
        edgecnn.load(path)


def test_truncated_model(tmp_path: Path) -> None:
    data = save(leaky_model(), tmp_path).read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError):
        edgecnn.load(path)


def test_opsets_before_7_are_upgraded_on_load(tmp_path: Path) -> None:
    model = edgecnn.load(save(leaky_model(opset=6), tmp_path))
    assert model.graph.metadata["opset"] == "7"
    np.testing.assert_allclose(model(np.full((1, 4), -4.0, np.float32)), np.full((1, 4), -1.0))


def test_every_unsupported_operator_is_listed(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("NonMaxSuppression", ["x"], ["a"], name="nms"),
        helper.make_node("Relu", ["a"], ["b"], name="ok"),
        helper.make_node("Frob", ["b"], ["y"], name="custom", domain="com.example"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)]
    )
    with pytest.raises(UnsupportedOperatorError) as info:
        edgecnn.load(save(model, tmp_path))
    assert info.value.unsupported == [("NonMaxSuppression", "nms"), ("com.example.Frob", "custom")]


def test_external_data_weights(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="r")],
        "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(np.arange(4096, dtype=np.float32), "big")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="ext.bin", size_threshold=0)
    assert (tmp_path / "ext.bin").exists()
    loaded = edgecnn.load(path)
    np.testing.assert_array_equal(loaded.graph.initializers["big"], np.arange(4096, dtype=np.float32))
    (tmp_path / "ext.bin").unlink()
    with pytest.raises(ModelFormatError, match="external weights"):
        edgecnn.load(path)


def test_constant_nodes_become_initializers(tmp_path: Path) -> None:
    const = helper.make_node(
        "Constant", [], ["c"], name="c", value=numpy_helper.from_array(np.float32(2.0).reshape(()), "v")
    )
    model = leaky_model()
    model.graph.node.insert(0, const)
    loaded = edgecnn.load(save(model, tmp_path))
    assert "c" in loaded.graph.initializers
    assert all(n.op != "Constant" for n in loaded.graph.nodes)
