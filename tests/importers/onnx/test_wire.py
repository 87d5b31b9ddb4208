"""The direct ONNX reader (importers/onnx/wire.py) against the onnx package: the same decoded values,
the same Graphs, the same errors (through the fallback) on every truncation of a file, the cases it
hands to the onnx package, and a load that never imports onnx."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgecnn.importers.onnx import reader
from edgecnn.importers.onnx.wire import NotFastPath, read_model


def rich_model() -> onnx.ModelProto:
    """Every attribute type and tensor storage the direct reader decodes, and shapes with symbols."""
    weights = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node(
            "Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1], group=1
        ),
        helper.make_node("LeakyRelu", ["c"], ["l"], name="", alpha=0.1),  # unnamed: gets a default name
        helper.make_node(
            "Constant", [], ["k"], name="k", value=helper.make_tensor("kv", TensorProto.INT64, [2], [-1, 16])
        ),
        helper.make_node("Reshape", ["l", "k"], ["r"], name="reshape"),
        helper.make_node("Gemm", ["r", "fc", "fb"], ["g"], name="fc", alpha=0.5, beta=2.0, transB=1),
        helper.make_node("Softmax", ["g"], ["y"], name="softmax", axis=-1),
    ]
    initializers = [
        numpy_helper.from_array(weights, "w"),  # raw_data
        helper.make_tensor("b", TensorProto.FLOAT, [4], [0.5, -1.0, 2.0, 0.0]),  # float_data
        numpy_helper.from_array(np.ones((5, 16), np.float32), "fc"),
        helper.make_tensor("fb", TensorProto.DOUBLE, [5], [1, 2, 3, 4, 5]),  # double_data
        helper.make_tensor("unused_i32", TensorProto.INT32, [3], [-7, 0, 7]),  # int32_data
        helper.make_tensor("unused_u64", TensorProto.UINT64, [2], [1, 2**63 + 5]),  # uint64_data
        helper.make_tensor("unused_scalar", TensorProto.INT64, [], [-3]),
        numpy_helper.from_array(np.array([True, False]), "unused_bool"),
        numpy_helper.from_array(np.arange(6, dtype=np.float16).reshape(2, 3), "unused_half"),
    ]
    graph = helper.make_graph(
        nodes,
        "rich",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", None])],
        initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 2)],
        producer_name="tests",
    )
    helper.set_model_props(model, {"author": "edgecnn", "note": "ünïcode"})
    return model


def lists_and_strings_node() -> onnx.ModelProto:
    """Attribute types no converter in this model needs: decoded all the same (read_model only)."""
    node = helper.make_node(
        "Custom",
        ["x"],
        ["y"],
        name="custom",
        floats=[0.25, -1.5],
        ints=[3, -4, 2**40],
        text="mode",
        texts=["a", "bé"],
        tensor=numpy_helper.from_array(np.arange(3, dtype=np.int8), "t"),
        tensors=[numpy_helper.from_array(np.zeros((1, 2), np.uint16), "t2")],
    )
    node.attribute.append(helper.make_attribute("empty", [], attr_type=onnx.AttributeProto.INTS))
    graph = helper.make_graph(
        [node],
        "lists",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, str(path))
    return path


def outcome(load: Any) -> Any:
    """A comparable summary of a load: the graph's content, or the error's type and message."""
    try:
        graph = load()
    except Exception as exc:
        return (type(exc).__name__, str(exc))
    return (
        graph.inputs,
        graph.outputs,
        graph.name,
        graph.metadata,
        graph.output_types,
        [repr(n) for n in graph.nodes],
        {k: (v.dtype.name, v.shape, v.tobytes()) for k, v in graph.initializers.items()},
    )


def via_onnx(path: Path) -> Any:
    return outcome(lambda: reader.graph_from_model_proto(reader.read_model_proto(path), str(path)))


def test_decoded_values_match_onnx(tmp_path: Path) -> None:
    path = save(rich_model(), tmp_path / "rich.onnx")
    model, proto = read_model(path), onnx.load(str(path))
    assert model.producer_name == "tests"
    assert model.opset_import == {"": 13, "com.example": 2}
    assert model.metadata == {"author": "edgecnn", "note": "ünïcode"}
    assert [n.op_type for n in model.nodes] == [n.op_type for n in proto.graph.node]
    for name, array in model.initializers:
        expected = numpy_helper.to_array(next(t for t in proto.graph.initializer if t.name == name))
        assert array.dtype == expected.dtype and array.shape == expected.shape, name
        np.testing.assert_array_equal(array, expected)
    assert model.nodes[4].attributes == {"alpha": 0.5, "beta": 2.0, "transB": 1}
    assert model.nodes[5].attributes == {"axis": -1}


def test_every_attribute_type_decodes_as_onnx_helper_does(tmp_path: Path) -> None:
    path = save(lists_and_strings_node(), tmp_path / "lists.onnx")
    (node,) = read_model(path).nodes
    (proto,) = onnx.load(str(path)).graph.node
    for attribute in proto.attribute:
        expected = helper.get_attribute_value(attribute)
        got = node.attributes[attribute.name]
        if isinstance(expected, onnx.TensorProto):
            np.testing.assert_array_equal(got, numpy_helper.to_array(expected))
            assert got.dtype == numpy_helper.to_array(expected).dtype
        elif isinstance(expected, bytes):
            assert got == expected.decode()
        elif expected and isinstance(expected[0], bytes):
            assert got == [v.decode() for v in expected]
        elif expected and isinstance(expected[0], onnx.TensorProto):
            assert [g.tobytes() for g in got] == [numpy_helper.to_array(e).tobytes() for e in expected]
        else:
            assert got == list(expected), attribute.name


def test_graph_equals_the_onnx_package_path(tmp_path: Path) -> None:
    path = save(rich_model(), tmp_path / "rich.onnx")
    direct = outcome(lambda: reader.load_onnx(path))
    assert direct == via_onnx(path)
    assert direct[3]["opset"] == "13"


def test_every_truncation_gives_the_same_graph_or_error(tmp_path: Path) -> None:
    """Cut anywhere, a file loads (or fails, with the same message) exactly as through onnx."""
    data = rich_model().SerializeToString()
    path = tmp_path / "cut.onnx"
    for end in range(0, len(data), 7):
        path.write_bytes(data[:end])
        assert outcome(lambda: reader.load_onnx(path)) == via_onnx(path), end


def test_flipped_bytes_give_the_same_graph_or_error(tmp_path: Path) -> None:
    data = bytearray(rich_model().SerializeToString())
    path = tmp_path / "flip.onnx"
    rng = np.random.default_rng(1)
    for position in rng.integers(0, len(data), 60):
        damaged = bytearray(data)
        damaged[position] ^= 0xFF
        path.write_bytes(bytes(damaged))
        assert outcome(lambda: reader.load_onnx(path)) == via_onnx(path), int(position)


def test_opsets_before_7_fall_back_and_are_upgraded(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="r")],
        "old",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    path = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)]), tmp_path / "old.onnx")
    assert reader.load_onnx(path).metadata["opset"] == "7"


@pytest.mark.parametrize("case", ["external", "sparse", "subgraph", "string_tensor", "sequence_input"])
def test_what_the_direct_reader_leaves_to_onnx(tmp_path: Path, case: str) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    relu = helper.make_node("Relu", ["x"], ["y"], name="r")
    graph = helper.make_graph([relu], case, [x], [y])
    if case == "external":
        graph.initializer.append(numpy_helper.from_array(np.arange(64, dtype=np.float32), "big"))
    elif case == "sparse":
        values = numpy_helper.from_array(np.array([1.0], np.float32), "s")
        indices = numpy_helper.from_array(np.array([2], np.int64), "s_idx")
        graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [4]))
    elif case == "subgraph":
        branch = helper.make_graph([helper.make_node("Relu", ["x"], ["z"])], "b", [], [y])
        graph.node.append(
            helper.make_node("If", ["x"], ["w"], name="if", then_branch=branch, else_branch=branch)
        )
    elif case == "string_tensor":
        graph.initializer.append(helper.make_tensor("words", TensorProto.STRING, [1], [b"hi"]))
    else:
        graph.input.append(
            helper.make_value_info(
                "seq", helper.make_sequence_type_proto(helper.make_tensor_type_proto(1, [1]))
            )
        )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / f"{case}.onnx"
    if case == "external":
        onnx.save(model, str(path), save_as_external_data=True, location="w.bin", size_threshold=0)
    else:
        save(model, path)
    with pytest.raises(NotFastPath):
        read_model(path)
    assert outcome(lambda: reader.load_onnx(path)) == via_onnx(path)


def test_loading_a_model_does_not_import_onnx(tmp_path: Path) -> None:
    path = save(rich_model(), tmp_path / "rich.onnx")
    code = f"""
import json, sys
import numpy as np
import edgecnn
model = edgecnn.load({str(path)!r})
model(np.ones((2, 3, 2, 2), np.float32))
print(json.dumps(["onnx" in sys.modules, "google.protobuf" in sys.modules]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, False]
