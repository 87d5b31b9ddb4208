"""fold_qdq_ops: the QDQ Add, pooling, Concat, LeakyRelu, LRN and reshaping layers between the integer
layers run on 8-bit data, and the model's outputs equal onnxruntime's (which fuses the same
patterns); patterns whose integer form would not mean the same are left alone. A whole zoo ResNet-18
quantised by quantize_static runs int8 from its first QuantizeLinear to its last DequantizeLinear,
on compiled kernels only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from bench.test_compiled_steps import reference_steps
from edgecnn.importers.onnx.reader import graph_from_model_proto
from edgecnn.kernels.cpu.int8.dot_kernel import available as dot_available
from edgecnn.model import Model
from edgecnn.passes import PIPELINE
from edgecnn.passes.fold_qdq_ops import fold_qdq_ops
from edgecnn.runtime.options import RuntimeOptions
from onnx_support import run_onnxruntime

SHAPE = (1, 4, 9, 9)
PARAMS = {  # name: (scale, zero point); "q0" is shared by x, its MaxPool and a Concat
    "q0": (0.05, 120), "q1": (0.07, 0), "q2": (0.06, 30), "q3": (0.09, 140), "q4": (0.02, 128),
}  # fmt: skip


def qdq_graph(dtype: int = TensorProto.UINT8) -> onnx.ModelProto:
    """Q(x) feeding, each between DequantizeLinear and QuantizeLinear nodes as quantize_static
    writes them: MaxPool (equal parameters), Add + Relu, Concat (unequal and equal parameters),
    MaxPool (unequal: stays float), AveragePool, GlobalAveragePool, Flatten, LeakyRelu."""
    nodes = []
    zero_type = np.uint8 if dtype == TensorProto.UINT8 else np.int8
    inits = []
    for name, (scale, zero) in PARAMS.items():
        shift = 0 if zero_type == np.uint8 else -128
        inits.append(numpy_helper.from_array(np.array(scale, np.float32), f"{name}_s"))
        inits.append(numpy_helper.from_array(np.array(zero + shift, zero_type), f"{name}_z"))

    def q(x: str, y: str, p: str) -> None:
        nodes.append(helper.make_node("QuantizeLinear", [x, f"{p}_s", f"{p}_z"], [y]))

    def dq(x: str, y: str, p: str) -> None:
        nodes.append(helper.make_node("DequantizeLinear", [x, f"{p}_s", f"{p}_z"], [y]))

    q("x", "a", "q0")
    dq("a", "a_f", "q0")
    nodes.append(helper.make_node("MaxPool", ["a_f"], ["m_f"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    q("m_f", "m", "q0")
    dq("m", "m_d", "q0")
    nodes += [helper.make_node("Add", ["a_f", "m_d"], ["s_f"]), helper.make_node("Relu", ["s_f"], ["r_f"])]
    q("r_f", "r", "q1")
    dq("r", "r_d", "q1")
    nodes.append(helper.make_node("Concat", ["r_d", "a_f"], ["c_f"], axis=1))  # unequal: requantised
    q("c_f", "c", "q2")
    nodes.append(helper.make_node("Concat", ["a_f", "m_d"], ["e_f"], axis=1))  # equal: a copy
    q("e_f", "e", "q0")
    dq("c", "c_d", "q2")
    nodes.append(helper.make_node("MaxPool", ["c_d"], ["p_f"], kernel_shape=[2, 2], strides=[2, 2]))
    q("p_f", "p", "q3")  # other parameters than its input's: left to the float MaxPool
    dq("p", "y1", "q3")
    dq("e", "e_d", "q0")
    nodes.append(helper.make_node("AveragePool", ["e_d"], ["v_f"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    q("v_f", "v", "q3")
    dq("v", "y3", "q3")
    nodes.append(helper.make_node("GlobalAveragePool", ["e_d"], ["g_f"]))
    q("g_f", "g", "q4")
    dq("g", "g_d", "q4")
    nodes.append(helper.make_node("Flatten", ["g_d"], ["f_f"]))
    q("f_f", "f", "q4")
    dq("f", "f_d", "q4")
    nodes.append(helper.make_node("LeakyRelu", ["f_d"], ["l_f"], alpha=0.2))
    q("l_f", "l", "q2")
    dq("l", "y2", "q2")
    return model_of(nodes, "qdq_ops", ["y1", "y2", "y3"], inits)


def model_of(
    nodes: list[onnx.NodeProto], name: str, outputs: list[str], inits: list[onnx.TensorProto]
) -> onnx.ModelProto:
    """An opset-17 model of ``nodes`` reading float "x" of SHAPE."""
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, None) for y in outputs],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("dtype", [TensorProto.UINT8, TensorProto.INT8], ids=["uint8", "int8"])
def test_patterns_fold_and_equal_onnxruntime(dtype: int) -> None:
    proto = qdq_graph(dtype)
    graph = graph_from_model_proto(proto, "qdq_ops.onnx")
    result = fold_qdq_ops(graph)
    ops = [n.op for n in result.graph.nodes]
    if dtype == TensorProto.INT8:  # onnxruntime runs these in float32 for int8: so does edgecnn
        assert ops.count("QuantizeLinear") == 5 and "Add" in ops and "AveragePool" in ops
        assert "GlobalAveragePool" in ops and not any(
            op in ops for op in ("QLinearAdd", "QLinearAveragePool")
        )
        assert {"QLinearConcat", "Concat", "QLinearLeakyRelu", "Flatten"} <= set(ops)
    else:
        assert ops == [
            "QuantizeLinear",
            "MaxPool",
            "QLinearAdd",
            "QLinearConcat",
            "Concat",
            "DequantizeLinear",  # the second MaxPool's input: other parameters on its output
            "MaxPool",
            "QuantizeLinear",
            "DequantizeLinear",
            "QLinearAveragePool",
            "DequantizeLinear",
            "QLinearGlobalAveragePool",
            "Flatten",
            "QLinearLeakyRelu",
            "DequantizeLinear",
        ]
        add = result.graph.nodes[2]
        assert add.attrs.activation == "relu" and add.outputs == ["r"]
        assert result.graph.nodes[4].inputs == ["a", "m"]  # the copy reads the 8-bit tensors
    model = Model(graph, RuntimeOptions.resolve(threads=1))
    if dtype == TensorProto.UINT8:  # compiled kernels only: the copy Concat is slabs, Flatten a view
        assert not reference_steps(model.plan_for({"x": np.zeros(SHAPE, np.float32)}))
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = (rng.standard_normal(SHAPE) * 3).astype(np.float32)
        got = model.run({"x": x})
        for name, expected in zip(("y1", "y2", "y3"), run_onnxruntime(proto, {"x": x})):
            np.testing.assert_array_equal(got[name], expected, err_msg=name)


def test_patterns_left_alone() -> None:
    proto = qdq_graph()
    # an Add whose output is also returned in float, and a MaxPool whose float output has a
    # second reader: the float tensors must stay
    proto.graph.output.append(helper.make_tensor_value_info("s_f", TensorProto.FLOAT, None))
    proto.graph.node.append(helper.make_node("Identity", ["m_f"], ["m_copy"]))
    proto.graph.output.append(helper.make_tensor_value_info("m_copy", TensorProto.FLOAT, None))
    graph = graph_from_model_proto(proto, "qdq_ops.onnx")
    ops = [n.op for n in fold_qdq_ops(graph).graph.nodes]
    assert "QLinearAdd" not in ops and ops.count("MaxPool") == 2 and "Add" in ops
    model = Model(graph, RuntimeOptions.resolve(threads=1))
    x = np.random.default_rng(4).standard_normal(SHAPE).astype(np.float32)
    got = model.run({"x": x})
    for name, expected in zip(("y1", "y2", "y3", "s_f", "m_copy"), run_onnxruntime(proto, {"x": x})):
        np.testing.assert_allclose(got[name], expected, rtol=0, atol=1e-6, err_msg=name)


def test_runs_right_after_fold_qdq() -> None:
    names = [name for name, _ in PIPELINE]
    assert names.index("fold_qdq_ops") == names.index("fold_qdq") + 1


def zoo_qdq(name: str, folder: Path, seed: int) -> tuple[Model, onnx.ModelProto, np.ndarray]:
    """The zoo model ``name`` (an eighth of its width, 64 x 64) as quantize_static writes it
    (after onnxruntime's pre-processing folds its BatchNormalization into the convolutions, as
    the lab measures it): edgecnn's model of it, the QDQ model, an input."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from edgecnn.bench.zoo import build_model
    from passes.test_fold_qdq import quantized_static

    onnx.save(build_model(name, width=0.125, resolution=64), folder / "float.onnx")
    spec = onnx.load(folder / "float.onnx").graph.input[0]
    shape = [d.dim_value or 1 for d in spec.type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed)
    samples = [{spec.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(2)]
    quant_pre_process(str(folder / "float.onnx"), str(folder / "folded.onnx"), skip_symbolic_shape=True)
    qdq = quantized_static(folder / "folded.onnx", folder / "qdq.onnx", samples, "uint8")
    model = Model(graph_from_model_proto(qdq, "qdq.onnx"), RuntimeOptions.resolve(threads=2))
    return model, qdq, rng.standard_normal(shape).astype(np.float32)


def test_zoo_resnet18_runs_int8_end_to_end(tmp_path: Path) -> None:
    """ResNet-18 (an eighth of its width, 64 x 64) as quantize_static writes it (after onnxruntime's
    pre-processing folds its BatchNormalization into the convolutions): after the passes
    only the input's QuantizeLinear and the output's DequantizeLinear remain around the 8-bit
    layers, every block's residual Add is in its last convolution's epilogue (fuse_int8_residual),
    every step runs a compiled kernel, and the output equals onnxruntime's."""

    model, qdq, x = zoo_qdq("resnet18", tmp_path, 9)
    spec = qdq.graph.input[0]
    plan = model.plan_for({spec.name: x})
    ops = [step.node.op for step in plan.steps]
    assert ops.count("QuantizeLinear") == 1 and ops.count("DequantizeLinear") == 1
    assert ops.count("QLinearConvAdd") == 8 and "QLinearGlobalAveragePool" in ops
    assert "QLinearAdd" not in ops and "Add" not in ops
    fused = {step.kernel.name for step in plan.steps if step.node.op == "QLinearConvAdd"}
    assert fused == ({"int8_dot_conv_add"} if dot_available() else {"int8_conv_add"})
    assert not reference_steps(plan)
    (expected,) = run_onnxruntime(qdq, {spec.name: x})
    np.testing.assert_array_equal(model.run({spec.name: x})[qdq.graph.output[0].name], expected)


def lrn_graph() -> onnx.ModelProto:
    """Q(x) -> DQ -> LRN -> Q -> DQ -> LRN -> MaxPool -> Q -> DQ (GoogLeNet's two LRNs as
    quantize_static writes them), and a third LRN whose float output is also returned."""
    inits = [
        numpy_helper.from_array(np.array(scale, np.float32), f"{name}_s")
        for name, (scale, _) in PARAMS.items()
    ] + [numpy_helper.from_array(np.array(zero, np.uint8), f"{name}_z") for name, (_, zero) in PARAMS.items()]

    def q(x: str, y: str, p: str) -> onnx.NodeProto:
        return helper.make_node("QuantizeLinear", [x, f"{p}_s", f"{p}_z"], [y])

    def dq(x: str, y: str, p: str) -> onnx.NodeProto:
        return helper.make_node("DequantizeLinear", [x, f"{p}_s", f"{p}_z"], [y])

    def lrn(x: str, y: str) -> onnx.NodeProto:
        return helper.make_node("LRN", [x], [y], size=5, alpha=0.5, beta=0.75, bias=1.0)

    nodes = [
        q("x", "a", "q1"),
        dq("a", "a_f", "q1"),
        lrn("a_f", "l_f"),
        q("l_f", "l", "q2"),
        dq("l", "l_d", "q2"),
    ]
    nodes += [
        lrn("l_d", "n_f"),
        helper.make_node("MaxPool", ["n_f"], ["p_f"], kernel_shape=[3, 3], strides=[2, 2]),
    ]
    nodes += [
        q("p_f", "p", "q3"),
        dq("p", "y1", "q3"),
        lrn("a_f", "o_f"),
        q("o_f", "o", "q4"),
        dq("o", "y2", "q4"),
    ]
    return model_of(nodes, "qdq_lrn", ["y1", "y2", "o_f"], inits)


def test_lrn_and_the_max_pool_after_it_fold() -> None:
    proto = lrn_graph()
    graph = graph_from_model_proto(proto, "qdq_lrn.onnx")
    result = fold_qdq_ops(graph)
    ops = [n.op for n in result.graph.nodes]
    assert ops == [
        "QuantizeLinear",
        "DequantizeLinear",  # the third LRN's input: its float output is returned
        "QLinearLRN",
        "QLinearLRN",  # the QuantizeLinear moved before the MaxPool ...
        "MaxPool",  # ... which pools the codes
        "DequantizeLinear",
        "LRN",
        "QuantizeLinear",
        "DequantizeLinear",
    ], ops
    assert result.graph.nodes[4].outputs == ["p"]
    model = Model(graph, RuntimeOptions.resolve(threads=1))
    rng = np.random.default_rng(5)
    for _ in range(3):
        x = (rng.standard_normal(SHAPE) * 3).astype(np.float32)
        got = model.run({"x": x})
        for name, expected in zip(("y1", "y2", "o_f"), run_onnxruntime(proto, {"x": x})):
            np.testing.assert_allclose(got[name], expected, rtol=1e-6, atol=0, err_msg=name)


def test_zoo_googlenet_runs_its_lrns_on_8bit_data(tmp_path: Path) -> None:
    """GoogLeNet (an eighth of its width, 64 x 64) as quantize_static writes it: both LRNs (and the
    MaxPool after the second) run on 8-bit data, as does every MaxPool; only the input's
    QuantizeLinear and the output's DequantizeLinear remain, every step runs a compiled kernel, and
    the output equals onnxruntime's."""
    model, qdq, x = zoo_qdq("googlenet", tmp_path, 11)
    spec = qdq.graph.input[0]
    plan = model.plan_for({spec.name: x})
    ops = [step.node.op for step in plan.steps]
    assert ops.count("QLinearLRN") == 2 and "LRN" not in ops
    assert ops.count("QuantizeLinear") == 1 and ops.count("DequantizeLinear") == 1
    assert not reference_steps(plan)
    pools = {s.kernel.name for s in plan.steps if s.node.op == "MaxPool"}
    assert ops.count("MaxPool") == 13 and pools == {"int8_max_pool"}
    (expected,) = run_onnxruntime(qdq, {spec.name: x})
    np.testing.assert_array_equal(model.run({spec.name: x})[qdq.graph.output[0].name], expected)


def test_quantize_stays_after_a_max_pool_whose_input_is_read_twice() -> None:
    """The second LRN's float output also returned: it and its MaxPool stay float (as does the third)."""
    proto = lrn_graph()
    proto.graph.output.append(helper.make_tensor_value_info("n_f", TensorProto.FLOAT, None))
    graph = graph_from_model_proto(proto, "qdq_lrn.onnx")
    result = fold_qdq_ops(graph)
    ops = [n.op for n in result.graph.nodes]
    assert ops.count("QLinearLRN") == 1 and ops.count("LRN") == 2
    assert not any("moved before" in change for change in result.changes)
    pool = next(n for n in result.graph.nodes if n.op == "MaxPool")
    assert pool.inputs == ["n_f"]
    model = Model(graph, RuntimeOptions.resolve(threads=1))
    x = np.random.default_rng(6).standard_normal(SHAPE).astype(np.float32)
    got = model.run({"x": x})
    for name, expected in zip(("y1", "y2", "o_f", "n_f"), run_onnxruntime(proto, {"x": x})):
        np.testing.assert_allclose(got[name], expected, rtol=1e-6, atol=0, err_msg=name)
