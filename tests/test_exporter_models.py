"""End-to-end: CNNs written the way PyTorch, TensorFlow and Paddle exporters write them (dynamic
batch, shape-computing subgraphs, NHWC transposes), checked against onnxruntime to 1e-4."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgecnn
from edgecnn.testing import assert_close
from onnx_support import run_onnxruntime

RNG = np.random.default_rng(1234)


def weight(name: str, *shape: int, scale: float = 0.2) -> onnx.TensorProto:
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def ints(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def make(
    nodes: list, inits: list, x_shape: list, opset: int, name: str, out_rank: int = 2
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [f"out{i}" for i in range(out_rank)])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name=name)
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def pytorch_style(opset: int) -> onnx.ModelProto:
    """conv-bn-relu-pool x2, then x.view(x.size(0), -1) -> Linear -> ReLU -> Linear."""
    n = helper.make_node
    nodes = [
        n("Conv", ["input", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        n("BatchNormalization", ["c1", "g1", "be1", "m1", "v1"], ["bn1"], epsilon=1e-5),
        n("Relu", ["bn1"], ["r1"]),
        n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], kernel_shape=[3, 3], group=2),
        n("Relu", ["c2"], ["r2"]),
        n("AveragePool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        n("Shape", ["p2"], ["shape"]),
        n("Gather", ["shape", "zero"], ["batch"], axis=0),
        n(
            "Unsqueeze",
            ["batch", "axes0"] if opset >= 13 else ["batch"],
            ["batch1"],
            **({} if opset >= 13 else {"axes": [0]}),
        ),
        n("Concat", ["batch1", "minus1"], ["new_shape"], axis=0),
        n("Reshape", ["p2", "new_shape"], ["flat"]),
        n("Gemm", ["flat", "fw1", "fb1"], ["f1"], transB=1),
        n("Relu", ["f1"], ["fr1"]),
        n("Gemm", ["fr1", "fw2", "fb2"], ["output"], transB=1),
    ]
    inits = [
        weight("w1", 8, 3, 3, 3),
        weight("b1", 8),
        weight("g1", 8),
        weight("be1", 8),
        weight("m1", 8),
        numpy_helper.from_array(RNG.uniform(0.5, 1.5, 8).astype(np.float32), "v1"),
        weight("w2", 8, 4, 3, 3),
        weight("b2", 8),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        ints("axes0", [0]),
        ints("minus1", [-1]),
        weight("fw1", 16, 8 * 4 * 4),
        weight("fb1", 16),
        weight("fw2", 5, 16),
        weight("fb2", 5),
    ]
    return make(nodes, inits, ["batch", 3, 16, 16], opset, "pytorch")


def tensorflow_style(opset: int) -> onnx.ModelProto:
    """NHWC input transposed to NCHW, explicit Pad + VALID conv, depthwise conv, ReLU6 as Clip,
    global mean via ReduceMean, Reshape with -1 and Softmax."""
    n = helper.make_node
    clip = (
        n("Clip", ["d1", "zero_f", "six_f"], ["r2"])
        if opset >= 11
        else n("Clip", ["d1"], ["r2"], min=0.0, max=6.0)
    )
    pad = (
        n("Pad", ["t", "pads"], ["padded"], mode="constant")
        if opset >= 11
        else n("Pad", ["t"], ["padded"], mode="constant", pads=[0, 0, 1, 1, 0, 0, 1, 1])
    )
    reduce = (
        n("ReduceMean", ["r2", "axes23"], ["gap"], keepdims=0)
        if opset >= 18
        else n("ReduceMean", ["r2"], ["gap"], axes=[2, 3], keepdims=0)
    )
    nodes = [
        n("Transpose", ["input"], ["t"], perm=[0, 3, 1, 2]),
        pad,
        n("Conv", ["padded", "w1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID"),
        n("Relu", ["c1"], ["r1"]),
        n("Conv", ["r1", "dw", "db"], ["d1"], kernel_shape=[3, 3], group=6, auto_pad="SAME_UPPER"),
        clip,
        reduce,
        n("Reshape", ["gap", "shape"], ["flat"]),
        n("MatMul", ["flat", "fw"], ["mm"]),
        n("Add", ["mm", "fb"], ["logits"]),
        n("Softmax", ["logits"], ["output"], axis=-1 if opset >= 13 else 1),
    ]
    inits = [
        ints("pads", [0, 0, 1, 1, 0, 0, 1, 1]),
        weight("w1", 6, 3, 3, 3),
        weight("dw", 6, 1, 3, 3),
        weight("db", 6),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero_f"),
        numpy_helper.from_array(np.array(6.0, np.float32), "six_f"),
        ints("axes23", [2, 3]),
        ints("shape", [-1, 6]),
        weight("fw", 6, 4),
        weight("fb", 4),
    ]
    return make(nodes, inits, ["N", 15, 15, 3], opset, "tensorflow")


def paddle_style(opset: int) -> onnx.ModelProto:
    """Feature-pyramid style: upsample x2 computed from Shape, concat with a skip, 1x1 conv, sigmoid."""
    n = helper.make_node
    nodes = [
        n("Conv", ["input", "w1", "b1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        n("LeakyRelu", ["c1"], ["l1"], alpha=0.1),
        n("Shape", ["l1"], ["s"]),
        n("Slice", ["s", "start2", "end4"], ["hw"]),
        n("Mul", ["hw", "two"], ["hw2"]),
        n("Slice", ["s", "start0", "end2"], ["nc"]),
        n("Concat", ["nc", "hw2"], ["sizes"], axis=0),
        n(
            "Resize",
            ["l1", "", "", "sizes"] if opset >= 13 else ["l1", "no_roi", "no_scales", "sizes"],
            ["up"],
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        ),
        n("Concat", ["up", "input"], ["cat"], axis=1),
        n("Conv", ["cat", "w2", "b2"], ["c2"], kernel_shape=[1, 1]),
        n("Sigmoid", ["c2"], ["output"]),
    ]
    inits = [
        weight("w1", 4, 3, 3, 3),
        weight("b1", 4),
        ints("start2", [2]),
        ints("end4", [4]),
        ints("start0", [0]),
        ints("end2", [2]),
        ints("two", [2]),
        numpy_helper.from_array(np.zeros(0, np.float32), "no_roi"),
        numpy_helper.from_array(np.zeros(0, np.float32), "no_scales"),
        weight("w2", 2, 7, 1, 1),
        weight("b2", 2),
    ]
    return make(nodes, inits, ["N", 3, "H", "W"], opset, "paddle", out_rank=4)


CASES = [
    (pytorch_style, 11, (3, 16, 16)),
    (pytorch_style, 13, (3, 16, 16)),
    (pytorch_style, 17, (3, 16, 16)),
    (tensorflow_style, 10, (15, 15, 3)),
    (tensorflow_style, 13, (15, 15, 3)),
    (tensorflow_style, 18, (15, 15, 3)),
    (paddle_style, 13, (3, 12, 16)),
    (paddle_style, 11, (3, 20, 8)),
]


@pytest.mark.parametrize(("builder", "opset", "sample_shape"), CASES)
def test_matches_onnxruntime_for_several_batch_sizes(
    tmp_path: Path, builder, opset: int, sample_shape
) -> None:
    proto = builder(opset)
    path = tmp_path / "model.onnx"
    onnx.save(proto, str(path))
    model = edgecnn.load(path)
    for batch in (1, 3):
        x = RNG.standard_normal((batch, *sample_shape)).astype(np.float32)
        (expected,) = run_onnxruntime(proto, {"input": x})
        assert_close(model(x), expected, rtol=1e-4, atol=1e-5)
    plan = model.plan_for(x)
    shape_ops = [s.node.op for s in plan.steps if s.node.op in ("Shape", "Gather", "Unsqueeze", "Slice")]
    assert shape_ops == [], f"shape subgraph not folded: {shape_ops}"
