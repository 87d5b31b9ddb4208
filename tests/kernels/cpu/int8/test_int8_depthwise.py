"""The direct int8 depthwise kernel (kernels/cpu/int8/depthwise.py): exact against the reference op
over sizes, strides, dilations, padding, zero points and the 8-bit extremes, in both of its layouts
(plane by plane, channels-last for small planes, float32 plane passes for 3x3); the layers it declines; a QDQ depthwise layer
bit-exact with onnxruntime; every depthwise layer of an int8 MobileNetV2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import edgecnn
from edgecnn.bench.zoo import model_path
from edgecnn.importers.onnx.reader import graph_from_model_proto
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.kernels.cpu.int8.depthwise import Int8DepthwiseKernel
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.model import Model
from edgecnn.ops.quant import Int8ConvAttrs
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import reference_run
from kernels.cpu.int8.test_int8_dot import extreme
from kernels.support import fast_run
from onnx_support import run_onnxruntime

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CONSTANTS = (1, 2, 3, 4, 5, 6, 7, 8)


@st.composite
def depthwise_cases(draw: st.DrawFn) -> tuple[Int8ConvAttrs, list[Any]]:
    """One filter per channel: half of the cases MobileNet's 3x3 layers (padding 1, stride 1 or 2:
    the float32 plane passes on planes they take), the others 3x3 (the fused loop) or other sizes
    up to 7 (the tap-by-tap loop), strides 1-3, dilations 1-2, any padding; u8 or s8 data and weights at their ends (-128
    included), zero points at the ends, every common activation, 8-bit or float output."""
    channels = draw(st.integers(2, 6))  # one channel is group 1: the dot-product kernel's
    pads: tuple[int, ...]
    if draw(st.booleans()):  # MobileNet's 3x3 layers, small planes to past the phased pass's reach
        stride = draw(st.integers(1, 2))
        kernel, strides, dilations, pads = (3, 3), (stride, stride), (1, 1), (1, 1, 1, 1)
        height, width = draw(st.integers(1, 19 * stride)), draw(st.integers(1, 37 * stride))
    else:
        kernel = draw(st.sampled_from([(3, 3), (3, 3), (5, 5), (7, 7), (1, 3), (2, 4)]))
        strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
        pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
        spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
        height = draw(st.integers(max(1, spans[0] - pads[0] - pads[2]), 19))
        width = draw(st.integers(max(1, spans[1] - pads[1] - pads[3]), 37))
    x_dtype = draw(st.sampled_from(["uint8", "int8"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    w = extreme(rng, (channels, 1, *kernel), "int8")
    info = np.iinfo(x_dtype)
    x_zp = np.array(draw(st.sampled_from([int(info.min), int(info.max), 0, 3])), dtype=x_dtype)
    activation = draw(
        st.sampled_from([{}, {"activation": "relu"}, {"activation": "clip", "low": 0.0, "high": 6.0}])
    )
    attrs = Int8ConvAttrs(
        kernel_shape=kernel, strides=strides, dilations=dilations, pads=pads, group=channels, **activation
    )
    out_dtype = draw(st.sampled_from(["uint8", "int8", None]))
    per_channel = draw(st.booleans())
    bias = rng.integers(-(2**20), 2**20, channels).astype(np.int32) if draw(st.booleans()) else None
    out_info = np.iinfo(out_dtype or "int8")
    inputs = [
        extreme(rng, (draw(st.integers(1, 2)), channels, height, width), x_dtype),
        np.float32(0.02),
        x_zp,
        w,
        rng.uniform(1e-3, 2e-2, channels if per_channel else 1).astype(np.float32),
        np.zeros(channels if per_channel else 1, np.int8),
        np.float32(draw(st.sampled_from([0.05, 0.5, 4.0]))) if out_dtype else None,
        np.array(draw(st.sampled_from([int(out_info.min), 0, int(out_info.max)])), out_dtype)
        if out_dtype
        else None,
        bias,
    ]
    return attrs, inputs


@pytest.mark.slow
@SETTINGS
@given(depthwise_cases(), st.sampled_from([1, 2]))
def test_depthwise_equals_reference_at_the_extremes(
    case: tuple[Int8ConvAttrs, list[Any]], threads: int
) -> None:
    attrs, inputs = case
    fast, kernel = fast_run("Int8Conv", attrs, inputs, CONSTANTS, threads)
    expected = reference_run("Int8Conv", attrs, inputs, CONSTANTS)
    assert kernel == "int8_depthwise"
    assert fast.dtype == expected.dtype
    np.testing.assert_array_equal(fast, expected)


def test_float_input_is_quantised_on_the_way_in() -> None:
    """Int8Conv on float32 data: quantised with the input's scale and zero point first."""
    rng = np.random.default_rng(3)
    attrs = Int8ConvAttrs(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), group=4)
    inputs = [
        rng.standard_normal((1, 4, 9, 11)).astype(np.float32),
        np.float32(0.02),
        np.uint8(128),
        extreme(rng, (4, 1, 3, 3), "int8"),
        np.float32(0.01),
        None,
        np.float32(0.1),
        np.uint8(100),
        None,
    ]
    fast, kernel = fast_run("Int8Conv", attrs, inputs, CONSTANTS, 2)
    assert kernel == "int8_depthwise"
    np.testing.assert_array_equal(fast, reference_run("Int8Conv", attrs, inputs, CONSTANTS))


def planned_kernel(attrs: Int8ConvAttrs, inputs: list[Any]) -> tuple[Int8DepthwiseKernel, np.ndarray]:
    """The Int8DepthwiseKernel planned for the Int8Conv node of ``inputs`` (constants as in
    CONSTANTS), and the reference op's output."""
    names = ["" if v is None else f"in{i}" for i, v in enumerate(inputs)]
    x = inputs[0]
    graph = Graph(
        [TensorSpec("in0", str(x.dtype), tuple(x.shape))],
        ["out"],
        [Node("Int8Conv", "node", names, ["out"], attrs)],
        {names[i]: np.asarray(inputs[i]) for i in CONSTANTS if inputs[i] is not None},
        name="Int8Conv",
    )
    model = Model(graph, RuntimeOptions.resolve(threads=2, device="cpu", optimize=False))
    plan = model.plan_for({"in0": x})
    (step,) = plan.steps
    types = [plan.types.get(i) if i else None for i in step.node.inputs]
    values = [plan.constants.get(i) if i else None for i in step.node.inputs]
    return Int8DepthwiseKernel(step.node, types, values), reference_run("Int8Conv", attrs, inputs, CONSTANTS)


ASYMMETRIC = (2, 1, 0, 2)
SAME = (1, 1, 1, 1)


@pytest.mark.parametrize(
    ("channels", "size", "kernel", "strides", "pads", "x_dtype", "path"),
    [
        (37, (9, 11), (3, 3), (2, 2), ASYMMETRIC, "uint8", "lanes"),  # a partial block of channels
        (35, (7, 7), (5, 5), (1, 1), ASYMMETRIC, "int8", "lanes"),
        (3, (13, 10), (3, 3), (1, 3), ASYMMETRIC, "uint8", "lanes"),  # fewer channels than one block
        (3, (40, 41), (3, 3), (1, 1), ASYMMETRIC, "int8", "planes"),
        (2, (47, 50), (5, 5), (2, 2), ASYMMETRIC, "uint8", "planes"),
        (5, (14, 14), (3, 3), (1, 1), SAME, "uint8", "same"),
        (3, (7, 16), (3, 3), (1, 1), SAME, "int8", "same"),  # the widest plane it takes
        (3, (17, 17), (3, 3), (1, 1), SAME, "uint8", "planes"),
        (4, (56, 57), (3, 3), (2, 2), SAME, "uint8", "phased"),
        (3, (41, 38), (3, 3), (2, 2), ASYMMETRIC, "int8", "phased"),
        (2, (112, 112), (3, 3), (2, 2), SAME, "uint8", "planes"),  # phases beyond BAND_BYTES
    ],
)
def test_every_layout_is_exact_at_the_extremes(
    channels: int,
    size: tuple[int, int],
    kernel: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    x_dtype: str,
    path: str,
) -> None:
    """Each path of the kernel equals the reference: channels-last for small planes (``lanes`` >
    0), plane by plane in int16, and the float32 plane passes for 3x3 (``flat``: "same" on small
    stride-1 planes, "phased" at stride 2), with the data, weights and zero points at their 8-bit
    ends, odd sizes and channel counts that leave a partial block, padding on every side, at 2
    threads."""
    rng = np.random.default_rng(channels)
    info = np.iinfo(x_dtype)
    attrs = Int8ConvAttrs(kernel_shape=kernel, strides=strides, pads=pads, group=channels)
    inputs = [
        extreme(rng, (2, channels, *size), x_dtype),
        np.float32(0.02),
        np.array(info.max if x_dtype == "uint8" else info.min, x_dtype),
        extreme(rng, (channels, 1, *kernel), "int8"),
        rng.uniform(1e-3, 2e-2, channels).astype(np.float32),
        np.zeros(channels, np.int8),
        np.float32(0.5),
        np.array(info.min, x_dtype),
        rng.integers(-(2**20), 2**20, channels).astype(np.int32),
    ]
    step, expected = planned_kernel(attrs, inputs)
    assert (step.flat or ("lanes" if step.lanes else "planes")) == path
    out = np.empty(step.out_shape, step.out_dtype)
    with cpu_threads(2):
        step.run_into(out, inputs[0])
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize(("channels", "outputs", "group"), [(4, 4, 2), (2, 4, 2)])
def test_other_groupings_stay_on_the_grouped_gemm(channels: int, outputs: int, group: int) -> None:
    """Two channels per group, or two filters per channel (channel multiplier 2): not depthwise."""
    rng = np.random.default_rng(4)
    attrs = Int8ConvAttrs(kernel_shape=(3, 3), pads=(1, 1, 1, 1), group=group)
    inputs = [
        extreme(rng, (1, channels, 6, 7), "uint8"),
        np.float32(0.02),
        np.uint8(7),
        extreme(rng, (outputs, channels // group, 3, 3), "int8"),
        np.float32(0.01),
        None,
        np.float32(0.5),
        np.uint8(3),
        None,
    ]
    fast, kernel = fast_run("Int8Conv", attrs, inputs, CONSTANTS, 1)
    assert kernel == "int8_im2col_gemm"
    np.testing.assert_array_equal(fast, reference_run("Int8Conv", attrs, inputs, CONSTANTS))


def depthwise_net(rng: np.random.Generator) -> onnx.ModelProto:
    """A MobileNet-style float block on a 13x17 input: 1x1 expansion, depthwise 3x3 (stride 1,
    then stride 2) each with ReLU, 1x1 projection."""

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        value = rng.standard_normal(shape).astype(np.float32) * np.float32(np.sqrt(2.0 / fan_in))
        return numpy_helper.from_array(value, name)

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w0", "b0"], ["c0"]),
        node("Relu", ["c0"], ["r0"]),
        node("Conv", ["r0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], group=12),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2], group=12),
        node("Relu", ["c2"], ["r2"]),
        node("Conv", ["r2", "w3", "b3"], ["y"]),
    ]
    weights = [weight("w0", 12, 3, 1, 1), weight("b0", 12), weight("w1", 12, 1, 3, 3), weight("b1", 12)]
    weights += [weight("w2", 12, 1, 3, 3), weight("b2", 12), weight("w3", 8, 12, 1, 1), weight("b3", 8)]
    graph = helper.make_graph(
        nodes,
        "depthwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 13, 17])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 7, 9])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def quantised(
    float_path: Path, out: Path, shape: tuple[int, ...], name: str, rng: np.random.Generator
) -> Path:
    """quantize_static's QDQ model (u8 activations, per-channel s8 weights) from a few inputs."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    samples = [{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(4)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    quantize_static(
        str(float_path),
        str(out),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
    )
    return out


def test_qdq_depthwise_layers_equal_onnxruntime(tmp_path: Path) -> None:
    """Both depthwise layers of a quantize_static QDQ block run int8_depthwise, and their quantised
    outputs equal onnxruntime's."""
    rng = np.random.default_rng(12)
    onnx.save(depthwise_net(rng), tmp_path / "float.onnx")
    qdq = onnx.load(quantised(tmp_path / "float.onnx", tmp_path / "qdq.onnx", (1, 3, 13, 17), "x", rng))
    model = Model(graph_from_model_proto(qdq, "qdq.onnx"), RuntimeOptions.resolve(threads=2))
    x = rng.standard_normal((1, 3, 13, 17)).astype(np.float32)
    plan = model.plan_for({"x": x})
    layers = [s for s in plan.steps if s.node.op == "QLinearConv" and s.node.attrs.group > 1]
    assert len(layers) == 2 and all(s.kernel.name == "int8_depthwise" for s in layers)
    names = [s.node.outputs[0] for s in layers]
    probe = onnx.ModelProto()
    probe.CopyFrom(qdq)
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    expected = run_onnxruntime(probe, {"x": x})[len(qdq.graph.output) :]
    got = model.run({"x": x}, outputs=names)
    for name, value in zip(names, expected):
        np.testing.assert_array_equal(got[name], value, err_msg=name)


@pytest.mark.slow
def test_int8_mobilenetv2_runs_every_depthwise_layer_directly(tmp_path: Path) -> None:
    """The kernel census of an int8 MobileNetV2 (width 0.25, 64x64): no grouped layer is left on the
    im2col GEMM, and the network's output stays close to the float one's."""
    rng = np.random.default_rng(0)
    float_path = model_path("mobilenetv2", tmp_path, 0.25, 64)
    model = onnx.load(str(float_path))
    name = model.graph.input[0].name
    shape = (1, 3, 64, 64)
    qdq_path = quantised(float_path, tmp_path / "qdq.onnx", shape, name, rng)
    net = edgecnn.load(str(qdq_path), threads=2)
    x = rng.standard_normal(shape).astype(np.float32)
    plan = net.plan_for({name: x})
    grouped = [s.kernel.name for s in plan.steps if s.node.op == "QLinearConv" and s.node.attrs.group > 1]
    assert len(grouped) == 17 and set(grouped) == {"int8_depthwise"}
    (expected,) = run_onnxruntime(onnx.load(str(qdq_path)), {name: x})
    (got,) = net.run({name: x}).values()
    np.testing.assert_allclose(got, expected, atol=0.05 * float(np.abs(expected).max()))
