"""Issue 34's ONNX and model-path cases: each ends in its documented EdgeCNNError, before the
allocation it would have made (peak memory measured in a child where the size matters)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import edgecnn
from edgecnn.errors import GraphError, ModelFormatError
from hardening.support import LOAD_AND_RUN, onnx_file, run_child, tensor

LOW_PEAK_MB = 700
"""A refused model's child stays near the interpreter with numpy, onnx and edgecnn imported
(about 250 MiB); the cases below would allocate terabytes."""


TERABYTE_CASES = {
    "ConstantOfShape of 4 PiB": (
        [helper.make_node("ConstantOfShape", ["s"], ["y"])],
        [tensor("s", [1 << 20, 1 << 20, 1 << 10])],
    ),
    "Range of 32 TiB": (
        [helper.make_node("Range", ["a", "b", "c"], ["y"])],
        [tensor("a", 0), tensor("b", 1 << 42), tensor("c", 1)],
    ),
    "Tile of 4e13 elements": ([helper.make_node("Tile", ["x", "r"], ["y"])], [tensor("r", [10**7, 10**6])]),
    "Conv with pads=1e6": (
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[10**6] * 4)],
        [numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")],
    ),
}


def test_declared_terabytes_are_refused_at_load_with_low_peak_memory(tmp_path: Path) -> None:
    paths = []
    for index, (case, (nodes, initializers)) in enumerate(TERABYTE_CASES.items()):
        inputs = [("x", [1, 1, 4, 4])] if "Conv" in case else [("x", [1, 4])]
        paths.append(str(onnx_file(tmp_path / f"case{index}.onnx", nodes, inputs, initializers)))
    result = run_child(LOAD_AND_RUN, *paths)
    for case, outcome in zip(TERABYTE_CASES, result["outcomes"]):
        assert outcome["error"] == "GraphError", (case, outcome)
        assert "over the memory limit" in outcome["message"] and "'y'" in outcome["message"], (case, outcome)
    assert result["peak_mb"] < LOW_PEAK_MB, result


def test_memory_limit_applies_to_loading_and_planning(tmp_path: Path) -> None:
    path = onnx_file(
        tmp_path / "cos.onnx",
        [helper.make_node("ConstantOfShape", ["s"], ["y"])],
        [],
        [tensor("s", [1024, 1024])],
    )
    assert edgecnn.load(path, memory_limit="64M").run({})["y"].shape == (1024, 1024)
    with pytest.raises(GraphError, match=r"tensor 'y' .* needs 4\.0 MiB, over the memory limit of 1\.0 MiB"):
        edgecnn.load(path, memory_limit="1M")


def test_attributes_of_infinity_are_format_errors(tmp_path: Path) -> None:
    for op, name in (("Softmax", "axis"), ("Conv", "group")):
        node = helper.make_node(op, ["x", "w"] if op == "Conv" else ["x"], ["y"])
        node.attribute.append(helper.make_attribute(name, -float("inf") if op == "Conv" else float("inf")))
        w = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
        path = onnx_file(tmp_path / f"{op}.onnx", [node], [("x", [1, 1, 2, 2])], [w])
        with pytest.raises(ModelFormatError, match=f"node '{op}_0' \\({op}\\)"):
            edgecnn.load(path)


def test_negative_initializer_dims_are_refused(tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.ones((1, 4), np.float32), "w")
    w.dims[:] = [-1, 4]  # numpy would read it as "infer this axis" and load it as (1, 4)
    path = onnx_file(
        tmp_path / "neg.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], [("x", [1, 4])], [w]
    )
    with pytest.raises(ModelFormatError, match=r"initializer 'w': negative dimension in \[-1, 4\]"):
        edgecnn.load(path)


def test_graph_error_of_a_huge_reshape_target_is_short(tmp_path: Path) -> None:
    path = onnx_file(
        tmp_path / "reshape.onnx",
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [("x", [1, 4])],
        [tensor("s", np.full(200_000, 3, np.int64))],
    )
    with pytest.raises(GraphError, match="200000 dimensions, over the 64 supported") as caught:
        edgecnn.load(path)
    assert len(str(caught.value)) < 400


def test_quantize_linear_with_one_input_is_a_graph_error(tmp_path: Path) -> None:
    """The QDQ folding pass indexed the scale input of a QuantizeLinear reading a Conv's output."""
    w = numpy_helper.from_array(np.ones((2, 1, 1, 1), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("QuantizeLinear", ["c"], ["y"])]
    path = onnx_file(tmp_path / "q.onnx", nodes, [("x", [1, 1, 4, 4])], [w])
    with pytest.raises(
        GraphError, match=r"QuantizeLinear_1 \(QuantizeLinear\): expects 2\.\.3 inputs, got 1"
    ):
        edgecnn.load(path)


def test_gemm_with_a_rank_4_bias_is_refused_at_load(tmp_path: Path) -> None:
    inits = [
        numpy_helper.from_array(np.ones((3, 4), np.float32), "w"),
        numpy_helper.from_array(np.ones((1, 1, 1, 4), np.float32), "b"),
    ]
    path = onnx_file(
        tmp_path / "gemm.onnx", [helper.make_node("Gemm", ["x", "w", "b"], ["y"])], [("x", [2, 3])], inits
    )
    with pytest.raises(GraphError, match=r"Gemm's C must broadcast to \[M, N\], got rank 4"):
        edgecnn.load(path)


def test_model_paths_that_are_not_regular_files(tmp_path: Path) -> None:
    zero = tmp_path / "zero.onnx"
    zero.symlink_to("/dev/zero")
    with pytest.raises(ModelFormatError, match="not a regular file"):
        edgecnn.load(zero)
    fifo = tmp_path / "fifo.onnx"
    os.mkfifo(fifo)  # opening it for reading would block for ever
    with pytest.raises(ModelFormatError, match="not a regular file"):
        edgecnn.load(fifo)
    with pytest.raises(ModelFormatError, match="is a directory"):
        edgecnn.load(tmp_path)
    model = onnx_file(tmp_path / "relu.onnx", [helper.make_node("Relu", ["x"], ["y"])])
    with pytest.raises(ModelFormatError, match=r"weights file .* is a directory"):
        edgecnn.load(model, weights=tmp_path)  # an IsADirectoryError before, for Darknet and Caffe


def test_external_weights_are_checked_before_they_are_read(tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.ones((1, 4), np.float32), "w")
    path = onnx_file(
        tmp_path / "ext.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], [("x", [1, 4])], [w]
    )
    model = onnx.load(str(path))
    onnx.external_data_helper.convert_model_to_external_data(model, location="w.bin", size_threshold=0)
    onnx.save(model, str(path))
    assert edgecnn.load(path).run(np.zeros((1, 4), np.float32))["y"].tolist() == [[1, 1, 1, 1]]
    (tmp_path / "w.bin").unlink()
    (tmp_path / "w.bin").symlink_to("/dev/zero")
    with pytest.raises(ModelFormatError, match=r"external weights file .*w\.bin is not a regular file"):
        edgecnn.load(path)


def test_constant_of_shape_with_a_string_value_is_a_format_error(tmp_path: Path) -> None:
    """Found by lab/fuzz: the converter called .item() on a string (AttributeError), or inference
    met the element type 'str32' (TypeError)."""
    node = helper.make_node("ConstantOfShape", ["s"], ["y"])
    node.attribute.append(helper.make_attribute("value", "abc"))  # a string attribute, not a tensor
    path = onnx_file(tmp_path / "cos.onnx", [node], [], [tensor("s", [2, 2])])
    with pytest.raises(ModelFormatError, match="value must be a numeric tensor"):
        edgecnn.load(path)


def test_an_initializer_of_1000_dimensions_is_a_format_error(tmp_path: Path) -> None:
    """Found by lab/fuzz: numpy refused the reshape with a bare ValueError."""
    w = numpy_helper.from_array(np.ones((1,), np.float32), "w")
    w.dims[:] = [1] * 1000
    path = onnx_file(
        tmp_path / "rank.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], [("x", [1, 4])], [w]
    )
    with pytest.raises(ModelFormatError, match="initializer 'w': 1000 dimensions, over the 64 supported"):
        edgecnn.load(path)
