"""ONNX: small seed models covering the importer's op families, mutated as ModelProtos (a field of any
message, a node's op type or inputs, an initializer's dims and bytes, the opset) and as bytes."""

from __future__ import annotations

import random
from pathlib import Path

import mutate
import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper, numpy_helper

Case = dict[str, bytes]
NAME = "onnx"
FIXTURE = Path(__file__).resolve().parents[2] / "src/edgecnn/data/simplecnn/face_binary_cls.onnx"
OPS = (
    "Relu", "Conv", "MaxPool", "AveragePool", "Gemm", "MatMul", "Add", "Mul", "Reshape", "Transpose",
    "Concat", "Slice", "Resize", "ConstantOfShape", "Range", "Tile", "Expand", "Gather", "Pad", "Split",
    "Softmax", "Flatten", "BatchNormalization", "QuantizeLinear", "DequantizeLinear", "Squeeze",
    "Unsqueeze", "Cast", "Shape", "ReduceMean", "LRN", "ConvTranspose", "Where", "Clip", "Upsample",
)  # fmt: skip
ATTRIBUTES = ("axis", "group", "pads", "strides", "kernel_shape", "dilations", "perm", "mode", "alpha", "to")


def _value(name: str, shape: list[int | str]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], output: str,
           initializers: list[TensorProto], opset: int = 13) -> bytes:  # fmt: skip
    graph = helper.make_graph(nodes, "seed", inputs, [_value(output, [])], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def _tensor(name: str, array: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(array, name)


def seeds() -> list[Case]:
    rng = np.random.default_rng(0)
    w = _tensor("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    b = _tensor("b", rng.standard_normal(4).astype(np.float32))
    fc = _tensor("fc", rng.standard_normal((5, 16)).astype(np.float32))
    cnn = _model(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["r"], name="relu"),
            helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[4, 4], strides=[4, 4]),
            helper.make_node("Flatten", ["p"], ["f"], name="flat"),
            helper.make_node("Gemm", ["f", "fc"], ["g"], name="gemm", transB=1),
            helper.make_node("Softmax", ["g"], ["y"], name="softmax", axis=1),
        ],
        [_value("x", ["N", 3, 8, 8])],
        "y",
        [w, b, fc],
    )
    shape = _tensor("shape", np.array([0, -1], np.int64))
    count = _tensor("count", np.array([2, 3], np.int64))
    reps = _tensor("reps", np.array([1, 2], np.int64))
    half = numpy_helper.from_array(np.array([0.5], np.float32))
    limits = [_tensor(n, np.array(v, np.float32)) for n, v in (("start", 0), ("limit", 6), ("delta", 1))]
    shapes = _model(
        [
            helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
            helper.make_node("Tile", ["r", "reps"], ["t"], name="tile"),
            helper.make_node("ConstantOfShape", ["count"], ["k"], name="fill", value=half),
            helper.make_node("Range", ["start", "limit", "delta"], ["q"], name="range"),
            helper.make_node("Reshape", ["q", "count"], ["q2"], name="reshape2"),
            helper.make_node("Add", ["k", "q2"], ["s"], name="add"),
            helper.make_node("Concat", ["t", "s"], ["y"], name="concat", axis=1),
        ],
        [_value("x", [2, 3])],
        "y",
        [shape, count, reps, *limits],
    )
    scale = _tensor("scale", np.array(0.05, np.float32))
    zero = _tensor("zero", np.array(0, np.int8))
    qdq = _model(
        [
            helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"], name="quant"),
            helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["d"], name="dequant"),
            helper.make_node("Conv", ["d", "w", "b"], ["c"], name="conv", group=1),
            helper.make_node("Resize", ["c", "", "scales"], ["y"], name="resize", mode="nearest"),
        ],
        [_value("x", ["N", 3, 6, 6])],
        "y",
        [scale, zero, w, b, _tensor("scales", np.array([1, 1, 2, 2], np.float32))],
    )
    return [{"model.onnx": data} for data in (cnn, shapes, qdq, FIXTURE.read_bytes())]


def _names(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    names = [t.name for t in graph.initializer] + [v.name for v in graph.input]
    return names + [out for node in graph.node for out in node.output]


def _edit_node(model: onnx.ModelProto, rng: random.Random) -> None:
    """A node's op type, an input rewired or dropped, or a known attribute added."""
    nodes = model.graph.node
    if not nodes:
        return
    node = nodes[rng.randrange(len(nodes))]
    action = rng.randrange(4)
    if action == 0:
        node.op_type = rng.choice(OPS)
    elif action == 1 and node.input:
        node.input[rng.randrange(len(node.input))] = rng.choice([*_names(model), ""])
    elif action == 2 and node.input:
        del node.input[rng.randrange(len(node.input))]
    else:
        name = rng.choice(ATTRIBUTES)
        value: object = mutate.interesting_int(rng)
        if rng.random() < 0.4:
            value = [
                mutate.clamp(mutate.interesting_int(rng), 64, True) for _ in range(rng.choice((1, 2, 4, 8)))
            ]
        elif rng.random() < 0.3:
            value = mutate.interesting_float(rng)
        elif isinstance(value, int):
            value = mutate.clamp(value, 64, True)
        node.attribute.append(helper.make_attribute(name, value))


def _edit_initializer(model: onnx.ModelProto, rng: random.Random) -> None:
    """An initializer's dims (negative, zero, huge), data type, or bytes."""
    tensors = model.graph.initializer
    if not tensors:
        return
    tensor = tensors[rng.randrange(len(tensors))]
    action = rng.randrange(3)
    if action == 0 and tensor.dims:
        tensor.dims[rng.randrange(len(tensor.dims))] = mutate.clamp(mutate.interesting_int(rng), 64, True)
    elif action == 1:
        tensor.data_type = rng.randrange(0, 25)
    elif tensor.raw_data:
        tensor.raw_data = mutate.mutate_bytes(tensor.raw_data, rng)


def mutate_case(case: Case, rng: random.Random) -> Case:
    data = case["model.onnx"]
    if rng.random() < 0.15:
        return {"model.onnx": mutate.mutate_bytes(data, rng)}
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except DecodeError:  # an earlier blind edit broke the framing: keep editing blindly
        return {"model.onnx": mutate.mutate_bytes(data, rng)}
    for _ in range(rng.choice((1, 1, 2, 3))):
        action = rng.random()
        if action < 0.35:
            mutate.mutate_message(model.graph, rng, _names(model))
        elif action < 0.6:
            _edit_node(model, rng)
        elif action < 0.8:
            _edit_initializer(model, rng)
        elif action < 0.9:
            mutate.mutate_repeated_message(model.graph, rng)
        else:
            opset = model.opset_import[0] if model.opset_import else model.opset_import.add()
            opset.version = rng.randint(1, 25)
    return {"model.onnx": model.SerializeToString()}
