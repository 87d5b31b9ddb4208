"""fold_qdq: QDQ models made by onnxruntime.quantization.quantize_static run as integer layers
whose outputs equal onnxruntime's (which fuses the same patterns into its own QLinear kernels),
with fewer nodes; layers where the integer operator would not mean the same stay as they are."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgecnn.kernels.cpu.int8.steps  # noqa: F401  (registers the int8 kernels)
from edgecnn.importers.onnx.reader import graph_from_model_proto
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.quant import QuantizeAttrs
from edgecnn.passes import PIPELINE
from edgecnn.passes.fold_qdq import fold_qdq
from edgecnn.runtime.options import RuntimeOptions
from onnx_support import run_onnxruntime

SHAPE = (1, 3, 11, 11)


def float_model(rng: np.random.Generator) -> onnx.ModelProto:
    """Conv-Relu-MaxPool-Conv-Relu-Flatten-Gemm(trans_b)-Relu-MatMul-Add, seeded weights."""

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Flatten", ["r2"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["g"], transB=1),
        helper.make_node("Relu", ["g"], ["h"]),
        helper.make_node("MatMul", ["h", "w4"], ["m"]),
        helper.make_node("Add", ["m", "b4"], ["y"]),
    ]
    weights = [weight("w1", 6, 3, 3, 3), weight("b1", 6), weight("w2", 8, 6, 3, 3), weight("b2", 8)]
    weights += [weight("w3", 12, 8 * 2 * 2), weight("b3", 12), weight("w4", 12, 5), weight("b4", 5)]
    graph = helper.make_graph(
        nodes,
        "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def quantized_static(
    source: Path, target: Path, samples: list[dict[str, np.ndarray]], activations: str, **options: object
) -> onnx.ModelProto:
    """The QDQ model onnxruntime's quantize_static writes for ``source`` (per-channel int8 weights,
    ``activations`` "int8" or "uint8", calibrated on ``samples``; ``options`` passed on)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    quantize_static(
        str(source),
        str(target),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QInt8 if activations == "int8" else QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
        **options,
    )
    return onnx.load(target)


@pytest.fixture(scope="module", params=["int8", "uint8"])
def qdq_model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> onnx.ModelProto:
    root: Path = tmp_path_factory.mktemp(f"qdq_{request.param}")
    rng = np.random.default_rng(11)
    onnx.save(float_model(rng), root / "float.onnx")
    samples = [{"x": rng.standard_normal(SHAPE).astype(np.float32)} for _ in range(6)]
    # uint8: 7-bit weights, no int16 saturation in ORT's u8s8 path
    return quantized_static(
        root / "float.onnx", root / "qdq.onnx", samples, request.param, reduce_range=request.param == "uint8"
    )


def quantized_outputs(model: onnx.ModelProto) -> list[str]:
    """The QuantizeLinear outputs of the model: what the folded layers write."""
    return [n.output[0] for n in model.graph.node if n.op_type == "QuantizeLinear"]


def test_qdq_layers_become_integer_layers_and_match_onnxruntime(qdq_model: onnx.ModelProto) -> None:
    (q_input,) = [n for n in qdq_model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "x"]
    (zero,) = [i for i in qdq_model.graph.initializer if i.name == q_input.input[2]]
    unsigned = zero.data_type == TensorProto.UINT8
    graph = graph_from_model_proto(qdq_model, "qdq.onnx")
    model = Model(graph, RuntimeOptions.resolve(threads=1))
    (report,) = [r for r in model.pass_reports if r.name == "fold_qdq"]
    assert [line.split(" -> ")[1].split()[0] for line in report.changes[:3]] == [
        "QLinearConv",
        "QLinearConv",
        "Int8Gemm",
    ]
    # per folded layer: its input activation and weights; and the three int32 biases
    assert "removed 11 DequantizeLinear node(s)" in report.changes[-1]
    before = len(graph.nodes)
    after = len(model.optimized_graph.nodes)
    layer_ops = [
        n.op for n in model.optimized_graph.nodes if n.op not in ("QuantizeLinear", "DequantizeLinear")
    ]
    assert layer_ops == [
        "QLinearConv",
        "MaxPool",
        "QLinearConv",
        "Flatten",
        "Int8Gemm",
        "QLinearMatMul",
        # fold_qdq_ops: with MaxPool and Flatten on the 8-bit data, no Q/DQ between; an int8 Add
        # stays float32, as onnxruntime runs it
        "QLinearAdd" if unsigned else "Add",
    ]
    assert (before, after) == (31, 9 if unsigned else 11)  # int8: DQ, Add, Q for QLinearAdd
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    kernels = {s.node.op: s.kernel.name for s in model.plan_for(x).steps}
    assert kernels["QLinearConv"] in ("int8_dot_conv", "int8_im2col_gemm")  # the dot kernel needs AVX2
    assert kernels["Int8Gemm"] == kernels["QLinearMatMul"] == "int8_dense"

    # Every quantised tensor equals onnxruntime's. They are requested as outputs so that ORT keeps
    # them, which keeps it from fusing the final DQ-Add-Q into its QLinearAdd: that one (the output
    # of edgecnn's QLinearAdd) is compared through y with the model onnxruntime fuses as usual.
    names = quantized_outputs(qdq_model)[:-1]
    probe = onnx.ModelProto()
    probe.CopyFrom(qdq_model)
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    rng = np.random.default_rng(5)
    for _ in range(4):
        x = rng.standard_normal(SHAPE).astype(np.float32)
        expected = dict(zip(["y", *names], run_onnxruntime(probe, {"x": x})))
        expected["y"] = run_onnxruntime(qdq_model, {"x": x})[0]
        got = model.run({"x": x}, outputs=["y", *names])
        for name in ["y", *names]:
            assert got[name].dtype == expected[name].dtype, name
            np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_pass_runs_before_constant_folding() -> None:
    names = [name for name, _ in PIPELINE]
    assert names.index("fold_qdq") < names.index("fold_constants")


# --------------------------------------------------------------- hand-made layers: when not to fold


def qdq_conv(bias_scale_factor: float = 1.0, float_bias: bool = False, extra_reader: bool = False) -> Graph:
    """DQ(x) -> Conv(DQ(w), DQ(b)) -> Q, per-channel int8 weights."""
    rng = np.random.default_rng(2)
    ws = (rng.uniform(0.01, 0.02, 4)).astype(np.float32)
    xs = np.float32(0.05)
    init = {
        "xs": np.array(xs), "xz": np.array(3, np.int8), "ys": np.array(0.2, np.float32), "yz": np.array(-5, np.int8),
        "wq": rng.integers(-127, 128, (4, 2, 3, 3)).astype(np.int8), "ws": ws, "wz": np.zeros(4, np.int8),
        "bq": rng.integers(-500, 500, 4).astype(np.int32), "bs": (xs * ws * np.float32(bias_scale_factor)),
        "bf": rng.standard_normal(4).astype(np.float32),
    }  # fmt: skip
    w_axis = QuantizeAttrs(axis=0)
    nodes = [
        Node("DequantizeLinear", "dqx", ["xq", "xs", "xz"], ["x"], QuantizeAttrs()),
        Node("DequantizeLinear", "dqw", ["wq", "ws", "wz"], ["w"], w_axis),
        Node("DequantizeLinear", "dqb", ["bq", "bs"], ["b"], w_axis),
        Node("Conv", "conv", ["x", "w", "bf" if float_bias else "b"], ["c"], ConvAttrs(pads=(1, 1, 1, 1))),
        Node("QuantizeLinear", "q", ["c", "ys", "yz"], ["y"], QuantizeAttrs()),
    ]
    outputs = ["y", "c"] if extra_reader else ["y"]
    return Graph([TensorSpec("xq", "int8", (1, 2, 6, 6))], outputs, nodes, init)


def run_both(graph: Graph) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    x = np.random.default_rng(4).integers(-128, 128, (1, 2, 6, 6)).astype(np.int8)
    optimized = Model(graph, RuntimeOptions.resolve(threads=1)).run({"xq": x})
    plain = Model(graph, RuntimeOptions.resolve(threads=1, optimize=False)).run({"xq": x})
    return optimized, plain


def test_hand_made_conv_folds_and_is_within_one_step_of_the_float_graph() -> None:
    graph = qdq_conv()
    result = fold_qdq(graph)
    assert [n.op for n in result.graph.nodes] == ["QLinearConv"]
    assert result.graph.nodes[0].inputs == ["xq", "xs", "xz", "wq", "ws", "wz", "ys", "yz", "bq"]
    optimized, plain = run_both(graph)
    # the float graph rounds its float32 sums; the integer layer sums exactly
    assert np.abs(optimized["y"].astype(int) - plain["y"].astype(int)).max() <= 1


@pytest.mark.parametrize(
    "variant",
    [
        {"bias_scale_factor": 1.001},  # bias grid is not xs * ws: no int32 bias means the same
        {"float_bias": True},  # a float bias would have to be rounded
        {"extra_reader": True},  # the float output is also returned
    ],
)
def test_layers_left_alone(variant: dict) -> None:
    graph = qdq_conv(**variant)
    assert fold_qdq(graph).changes == []
    optimized, plain = run_both(graph)
    np.testing.assert_array_equal(optimized["y"], plain["y"])


def test_gemm_with_alpha_or_transposed_a_is_left_alone() -> None:
    rng = np.random.default_rng(3)
    init = {
        "as": np.array(0.1, np.float32), "az": np.array(0, np.int8), "ys": np.array(0.3, np.float32),
        "yz": np.array(0, np.int8), "bq": rng.integers(-127, 128, (5, 4)).astype(np.int8),
        "bs": np.array(0.02, np.float32),
    }  # fmt: skip
    for attrs, shape in (
        (GemmAttrs(alpha=0.5, trans_b=True), (3, 4)),
        (GemmAttrs(trans_a=True, trans_b=True), (4, 3)),
    ):
        graph = Graph(
            [TensorSpec("aq", "int8", shape)],
            ["y"],
            [
                Node("DequantizeLinear", "dqa", ["aq", "as", "az"], ["a"], QuantizeAttrs()),
                Node("DequantizeLinear", "dqb", ["bq", "bs"], ["b"], QuantizeAttrs()),
                Node("Gemm", "gemm", ["a", "b"], ["g"], attrs),
                Node("QuantizeLinear", "q", ["g", "ys", "yz"], ["y"], QuantizeAttrs()),
            ],
            init,
        )
        assert fold_qdq(graph).changes == [], attrs
    graph.nodes[2].attrs = GemmAttrs(trans_b=True)
    graph.inputs = [TensorSpec("aq", "int8", (3, 4))]
    folded = fold_qdq(graph).graph
    assert [n.op for n in folded.nodes] == ["Int8Gemm"]
    assert folded.initializers[folded.nodes[0].inputs[5]].dtype == np.int8  # zero point made for B


def test_zoo_squeezenet_qdq_equals_onnxruntime(tmp_path: Path) -> None:
    """A whole network (Concat, MaxPool, global pooling between the folded convolutions): every
    quantised tensor equals onnxruntime's."""
    from edgecnn.bench.zoo import build_model

    onnx.save(build_model("squeezenet1.1", width=0.25, resolution=48), tmp_path / "float.onnx")
    spec = onnx.load(tmp_path / "float.onnx").graph.input[0]
    shape = [d.dim_value or 1 for d in spec.type.tensor_type.shape.dim]
    rng = np.random.default_rng(8)
    samples = [{spec.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(3)]
    qdq = quantized_static(tmp_path / "float.onnx", tmp_path / "qdq.onnx", samples, "int8")
    model = Model(graph_from_model_proto(qdq, "qdq.onnx"), RuntimeOptions.resolve(threads=1))
    convs = sum(n.op_type == "Conv" for n in qdq.graph.node)
    assert sum(n.op == "QLinearConv" for n in model.optimized_graph.nodes) == convs
    names = quantized_outputs(qdq)
    probe = onnx.ModelProto()
    probe.CopyFrom(qdq)
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    x = rng.standard_normal(shape).astype(np.float32)
    expected = run_onnxruntime(probe, {spec.name: x})[len(qdq.graph.output) :]
    got = model.run({spec.name: x}, outputs=names)
    for name, value in zip(names, expected):
        np.testing.assert_array_equal(got[name], value, err_msg=name)
