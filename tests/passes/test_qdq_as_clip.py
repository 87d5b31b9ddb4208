"""passes/qdq_as_clip.py without a device: each activation QuantizeLinear -> DequantizeLinear
pair becomes a Clip to the pair's range (uint8 and int8, zero points at the limits and inside),
the rewritten graph computes the float layer with dequantised weights and those bounds, and the
pairs it must keep (per-axis, a graph output, an 8-bit tensor other ops read) stay."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgecnn.importers.onnx.reader import graph_from_model_proto
from edgecnn.ir.graph import Graph, Node
from edgecnn.model import Model
from edgecnn.passes.qdq_as_clip import clip_activation_qdq
from edgecnn.runtime.options import RuntimeOptions

SHAPE = (1, 3, 5, 7)
WEIGHTS = np.random.default_rng(3).integers(-128, 128, (4, 3, 1, 1), dtype=np.int8)
W_SCALE = np.array([0.02, 0.03, 0.01, 0.05], np.float32)


def one_conv(
    x_param: tuple[float, int], y_param: tuple[float, int], dtype: int, y_output: bool = False
) -> Graph:
    """x -> Q -> DQ -> Conv(DQ(int8 weights, per channel)) -> Q -> DQ -> y (or -> Q -> y)."""
    zp_type = np.uint8 if dtype == TensorProto.UINT8 else np.int8
    inits = [
        numpy_helper.from_array(WEIGHTS, "w8"),
        numpy_helper.from_array(W_SCALE, "ws"),
        numpy_helper.from_array(np.zeros(4, np.int8), "wz"),
    ]
    for name, (scale, zero) in (("x", x_param), ("y", y_param)):
        inits += [
            numpy_helper.from_array(np.array(scale, np.float32), f"{name}s"),
            numpy_helper.from_array(np.array(zero, zp_type), f"{name}z"),
        ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w8", "ws", "wz"], ["w"], axis=0),
        helper.make_node("Conv", ["xd", "w"], ["c"]),
        helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["yq" if not y_output else "y"]),
    ]
    out_type = dtype if y_output else TensorProto.FLOAT
    if not y_output:
        nodes.append(helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]))
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", out_type, (1, 4, 5, 7))],
        inits,
    )  # fmt: skip
    return graph_from_model_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), "m")


def run(graph: Graph, x: np.ndarray) -> np.ndarray:
    return Model(graph, RuntimeOptions.resolve(threads=1)).run({"x": x})["y"]


def bounds(param: tuple[float, int], dtype: int) -> tuple[np.float32, np.float32]:
    lo, hi = (0, 255) if dtype == TensorProto.UINT8 else (-128, 127)
    s, z = np.float32(param[0]), np.float32(param[1])
    return np.float32((lo - z) * s), np.float32((hi - z) * s)


@pytest.mark.parametrize(
    ("dtype", "x_param", "y_param"),
    [
        (TensorProto.UINT8, (0.02, 128), (0.01, 0)),  # the output pair a dropped Relu leaves
        (TensorProto.UINT8, (0.03, 0), (0.02, 255)),  # zero points at both limits
        (TensorProto.INT8, (0.02, 0), (0.015, -128)),
        (TensorProto.INT8, (0.05, 127), (0.01, 3)),
    ],
)
def test_pairs_become_clips_of_their_range(
    dtype: int, x_param: tuple[float, int], y_param: tuple[float, int]
) -> None:
    graph = one_conv(x_param, y_param, dtype)
    result = clip_activation_qdq(graph)
    ops = [node.op for node in result.graph.nodes]
    assert ops.count("Clip") == 2 and "QuantizeLinear" not in ops and ops.count("DequantizeLinear") == 1
    assert result.changes == ["2 activation QuantizeLinear/DequantizeLinear pairs as Clip"]
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32) * 3  # beyond both ranges
    x_lo, x_hi = bounds(x_param, dtype)
    y_lo, y_hi = bounds(y_param, dtype)
    w = WEIGHTS[:, :, 0, 0].astype(np.float32) * W_SCALE[:, None]
    conv = np.einsum("mc,nchw->nmhw", w, np.clip(x, x_lo, x_hi))
    np.testing.assert_allclose(run(result.graph, x), np.clip(conv, y_lo, y_hi), rtol=1e-5, atol=1e-6)
    assert graph.nodes[0].op == "QuantizeLinear"  # the input graph is left as it was


def test_int8_graph_output_keeps_its_quantize_linear() -> None:
    graph = one_conv((0.02, 128), (0.01, 0), TensorProto.UINT8, y_output=True)
    ops = [node.op for node in clip_activation_qdq(graph).graph.nodes]
    assert ops.count("Clip") == 1 and ops.count("QuantizeLinear") == 1 and ops[-1] == "QuantizeLinear"
    x = np.random.default_rng(2).standard_normal(SHAPE).astype(np.float32)
    assert run(clip_activation_qdq(graph).graph, x).dtype == np.uint8


def test_per_axis_and_shared_8_bit_tensors_stay() -> None:
    """A per-axis activation pair is not a scalar range; an 8-bit tensor read by another op than
    DequantizeLinear keeps its QuantizeLinear while its DequantizeLinear readers become Clips."""
    graph = one_conv((0.02, 128), (0.01, 0), TensorProto.UINT8)
    graph.initializers["xs"] = np.array([0.02], np.float32)  # still one value: rewritten
    assert "Clip" in [n.op for n in clip_activation_qdq(graph).graph.nodes]
    per_axis = one_conv((0.02, 128), (0.01, 0), TensorProto.UINT8)
    per_axis.initializers["ys"] = np.full(4, 0.01, np.float32)
    per_axis.initializers["yz"] = np.zeros(4, np.uint8)
    ops = [n.op for n in clip_activation_qdq(per_axis).graph.nodes]
    assert ops.count("Clip") == 1 and ops.count("QuantizeLinear") == 1 and ops.count("DequantizeLinear") == 2
    shared = one_conv((0.02, 128), (0.01, 0), TensorProto.UINT8)
    shared.outputs.append("xq")
    ops = [n.op for n in clip_activation_qdq(shared).graph.nodes]
    assert ops.count("Clip") == 2 and ops.count("QuantizeLinear") == 1


def test_float_graph_unchanged() -> None:
    graph = one_conv((0.02, 128), (0.01, 0), TensorProto.UINT8)
    rewritten = clip_activation_qdq(graph).graph
    again = clip_activation_qdq(rewritten)
    assert again.graph is rewritten and again.changes == []


def test_pair_with_other_dequantize_parameters_stays() -> None:
    """DQ(Q(x, s1, z), s2, z) rescales, so it is not a range of x: left as it is."""
    graph = one_conv((0.02, 128), (0.01, 0), TensorProto.UINT8)
    graph.initializers["ys2"] = np.array(0.03, np.float32)
    last = graph.nodes[-1]
    assert last.op == "DequantizeLinear"
    graph.nodes[-1] = Node(
        last.op, last.name, [last.inputs[0], "ys2", last.inputs[2]], list(last.outputs), last.attrs
    )
    rewritten = clip_activation_qdq(graph).graph
    ops = [n.op for n in rewritten.nodes]
    assert ops.count("Clip") == 1 and ops[-2:] == ["QuantizeLinear", "DequantizeLinear"]
    x = np.random.default_rng(4).standard_normal(SHAPE).astype(np.float32)
    steps = run(rewritten, x) / np.float32(0.03)  # still on the grid of the second scale
    assert np.allclose(steps, np.rint(steps), atol=1e-3)
