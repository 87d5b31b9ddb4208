"""int8 kernels (Int8Conv/QLinearConv, Int8Gemm/QLinearMatMul, QuantizeLinear) against the numpy
references in edgecnn.ops.quant, with hypothesis over geometry, zero points, activations and output
kinds; the quantised ops and whole QOperator models against onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import edgecnn.kernels.cpu.int8.dot_conv  # registers the dot-product convolution
import edgecnn.kernels.cpu.int8.steps  # noqa: F401  (registers the int8 kernels)
from edgecnn.importers.onnx.reader import graph_from_model_proto
from edgecnn.kernels.cpu.int8.dot_kernel import available
from edgecnn.model import Model
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.quant import Int8ConvAttrs, Int8GemmAttrs, QuantizeAttrs
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import reference_run
from kernels.support import fast_run
from onnx_support import feeds_of, node_model, run_onnxruntime

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ACTIVATIONS = ("none", "relu", "leaky_relu", "clip")


def int8(rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "int8") -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def assert_within_one(actual: np.ndarray, expected: np.ndarray, exact: bool) -> None:
    """Integer outputs equal (or one step apart where a float activation's rounding may differ)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    difference = np.abs(actual.astype(np.int64) - expected.astype(np.int64))
    assert difference.max(initial=0) <= (0 if exact else 1)


@st.composite
def layer_parameters(draw: st.DrawFn, channels: int) -> dict[str, Any]:
    """Input/output grids, weight scales, activation and whether the output is float."""
    x_dtype = draw(st.sampled_from(["float32", "int8", "uint8"]))
    zp_dtype = "uint8" if x_dtype == "uint8" else "int8"
    info = np.iinfo(zp_dtype)
    return {
        "x_dtype": x_dtype,
        "x_scale": np.float32(draw(st.floats(0.005, 0.2))),
        "x_zp": np.array(draw(st.integers(int(info.min), int(info.max))), dtype=zp_dtype),
        "w_scale": np.asarray(
            draw(st.lists(st.floats(1e-4, 0.05), min_size=channels, max_size=channels)), np.float32
        ),
        "y_scale": None if draw(st.booleans()) else np.float32(draw(st.floats(0.01, 2.0))),
        "y_zp": np.int8(draw(st.integers(-128, 127))),
        "activation": draw(st.sampled_from(ACTIVATIONS)),
        "bias": draw(st.booleans()),
    }


def layer_inputs(
    rng: np.random.Generator, p: dict[str, Any], x_shape: tuple[int, ...], w: np.ndarray
) -> list[np.ndarray | None]:
    if p["x_dtype"] == "float32":
        x = (rng.standard_normal(x_shape) * 3).astype(np.float32)
    else:
        x = int8(rng, x_shape, p["x_dtype"])
    out_int8 = p["y_scale"] is not None
    bias = rng.integers(-3000, 3000, w.shape[0]).astype(np.int32) if p["bias"] else None
    return [
        x,
        p["x_scale"],
        p["x_zp"],
        w,
        p["w_scale"],
        np.zeros(w.shape[0], np.int8),
        p["y_scale"] if out_int8 else None,
        p["y_zp"] if out_int8 else None,
        bias,
    ]


@st.composite
def conv_cases(draw: st.DrawFn) -> tuple[Int8ConvAttrs, list[np.ndarray | None]]:
    group = draw(st.integers(1, 3))
    in_channels = group * draw(st.integers(1, 4))
    out_channels = group * draw(st.integers(1, 5))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    strides = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    height = draw(st.integers(max(1, spans[0] - pads[0] - pads[2]), 13))
    width = draw(st.integers(max(1, spans[1] - pads[1] - pads[3]), 13))
    p = draw(layer_parameters(out_channels))
    attrs = Int8ConvAttrs(
        kernel_shape=kernel,
        strides=strides,
        dilations=dilations,
        pads=pads,
        group=group,
        activation=p["activation"],
        negative_slope=0.1,
        low=-0.5,
        high=1.5,
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    w = int8(rng, (out_channels, in_channels // group, *kernel))
    w[w == -128] = -127
    batch = draw(st.integers(1, 2))
    return attrs, layer_inputs(rng, p, (batch, in_channels, height, width), w)


CONSTANTS = (1, 2, 3, 4, 5, 6, 7, 8)


def conv_kernel(group: int, channels: tuple[int, int] = (0, 0)) -> str:
    """The kernel a convolution of ``group`` groups and (input, output) ``channels`` gets: the
    dot-product one where it applies, the direct loop for one filter per channel."""
    if group > 1 and channels == (group, group):
        return "int8_depthwise"
    return "int8_dot_conv" if group == 1 and available() else "int8_im2col_gemm"


@SETTINGS
@given(conv_cases(), st.sampled_from([1, 2]))
def test_int8_conv_matches_reference(
    case: tuple[Int8ConvAttrs, list[np.ndarray | None]], threads: int
) -> None:
    attrs, inputs = case
    fast, kernel = fast_run("Int8Conv", attrs, inputs, CONSTANTS, threads)
    expected = reference_run("Int8Conv", attrs, inputs, CONSTANTS)
    assert kernel == conv_kernel(attrs.group, (inputs[0].shape[1], inputs[3].shape[0]))
    if inputs[6] is None:  # float output: the same float32 operations in the same order
        np.testing.assert_allclose(fast, expected, rtol=1e-6, atol=1e-6)
    else:
        assert_within_one(fast, expected, exact=attrs.activation in ("none", "relu"))


@st.composite
def gemm_cases(draw: st.DrawFn) -> tuple[Int8GemmAttrs, list[np.ndarray | None]]:
    rows, depth, columns = draw(st.integers(1, 5)), draw(st.integers(1, 70)), draw(st.integers(1, 19))
    p = draw(layer_parameters(columns))
    trans_b = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    w = int8(rng, (columns, depth) if trans_b else (depth, columns))
    attrs = Int8GemmAttrs(trans_b=trans_b, activation=p["activation"], negative_slope=0.1, low=-0.5, high=1.5)
    inputs = layer_inputs(rng, p, (rows, depth), w if trans_b else w.T)
    inputs[3] = w
    return attrs, inputs


@SETTINGS
@given(gemm_cases(), st.sampled_from([1, 2]))
def test_int8_gemm_matches_reference(
    case: tuple[Int8GemmAttrs, list[np.ndarray | None]], threads: int
) -> None:
    attrs, inputs = case
    fast, kernel = fast_run("Int8Gemm", attrs, inputs, CONSTANTS, threads)
    expected = reference_run("Int8Gemm", attrs, inputs, CONSTANTS)
    assert kernel == "int8_dense"
    if inputs[6] is None:
        np.testing.assert_allclose(fast, expected, rtol=1e-6, atol=1e-6)
    else:
        assert_within_one(fast, expected, exact=attrs.activation in ("none", "relu"))


@pytest.mark.parametrize("pads", [(0, 0, 0, 1), (1, 0, 0, 0), (0, 0, 0, 0)])
def test_one_by_one_kernels_with_padding_on_one_side(pads: tuple[int, ...]) -> None:
    """A 1x1 convolution is read without im2col only when no side is padded."""
    rng = np.random.default_rng(8)
    inputs = [int8(rng, (1, 3, 4, 5)), np.float32(0.1), np.int8(-3), int8(rng, (2, 3, 1, 1))]
    inputs += [np.full(2, 0.02, np.float32), None, np.float32(0.3), np.int8(4), None]
    attrs = Int8ConvAttrs(pads=pads)
    fast, kernel = fast_run("Int8Conv", attrs, inputs, CONSTANTS, 1)
    assert kernel == conv_kernel(1)
    np.testing.assert_array_equal(fast, reference_run("Int8Conv", attrs, inputs, CONSTANTS))


def test_float_input_is_quantized_like_quantize_linear() -> None:
    """Int8Conv on float input == Int8Conv on QuantizeLinear(input): one rounding, same grid."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 9, 7)).astype(np.float32)
    w = int8(rng, (5, 3, 3, 3))
    inputs = [x, np.float32(0.02), np.int8(-7), w, np.full(5, 0.01, np.float32), None, None, None, None]
    attrs = Int8ConvAttrs(pads=(1, 1, 1, 1))
    q = reference_run("QuantizeLinear", QuantizeAttrs(), [x, np.float32(0.02), np.int8(-7)], (1, 2))
    from_float, _ = fast_run("Int8Conv", attrs, inputs, (1, 2, 3, 4), 1)
    from_int8, _ = fast_run("Int8Conv", attrs, [q, *inputs[1:]], (1, 2, 3, 4), 1)
    np.testing.assert_array_equal(from_float, from_int8)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantize_kernel_matches_reference(dtype: str) -> None:
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((2, 3, 17, 5)) * 40).astype(np.float32)
    x.flat[:4] = [0.5, 1.5, -0.5, -2.5]  # ties round to even
    inputs = [x, np.float32(0.5), np.array(3, dtype=dtype)]
    fast, kernel = fast_run("QuantizeLinear", QuantizeAttrs(), inputs, (1, 2), 1)
    assert kernel == "quantize_int8"
    np.testing.assert_array_equal(fast, reference_run("QuantizeLinear", QuantizeAttrs(), inputs, (1, 2)))


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantize_kernel_saturates_over_several_chunks(dtype: str) -> None:
    """An odd size spanning two parallel chunks and a ragged tail; values at and beyond the 8-bit
    limits (infinities, float32 extremes, ties just inside and outside the range) saturate as the
    reference does."""
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((1, 3, 73, 77)) * 100).astype(np.float32)  # 16,863 values
    extremes = [np.inf, -np.inf, 3.4e38, -3.4e38, 1e-45, -1e-45, 0.0, -0.0]
    ties = np.arange(-130.5, 130.5, 1.0) * 0.5  # every half step across both 8-bit ranges
    x.flat[: len(extremes)] = extremes
    x.flat[-len(ties) :] = ties
    inputs = [x, np.float32(0.5), np.array(np.iinfo(dtype).max, dtype=dtype)]  # an extreme zero point
    fast, kernel = fast_run("QuantizeLinear", QuantizeAttrs(), inputs, (1, 2), 2)
    assert kernel == "quantize_int8"
    with np.errstate(over="ignore"):
        expected = reference_run("QuantizeLinear", QuantizeAttrs(), inputs, (1, 2))
    np.testing.assert_array_equal(fast, expected)
    assert fast.min() == np.iinfo(dtype).min and fast.max() == np.iinfo(dtype).max


def test_asymmetric_weights_fall_back_to_the_reference() -> None:
    rng = np.random.default_rng(5)
    inputs = [int8(rng, (1, 2, 5, 5)), np.float32(0.1), np.int8(0), int8(rng, (3, 2, 3, 3))]
    inputs += [np.float32(0.01), np.int8(2), np.float32(0.5), np.int8(0)]
    fast, kernel = fast_run("QLinearConv", ConvAttrs(), inputs, (1, 2, 3, 4, 5, 6, 7), 1)
    assert kernel == "reference"
    np.testing.assert_array_equal(
        fast, reference_run("QLinearConv", ConvAttrs(), inputs, (1, 2, 3, 4, 5, 6, 7))
    )


# ------------------------------------------------------------------------------ against onnxruntime


def edgecnn_run(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], device: str = "cpu"
) -> list[np.ndarray]:
    graph = graph_from_model_proto(model, "test")
    result = Model(graph, RuntimeOptions.resolve(threads=1, device=device)).run(feeds)
    return [result[name] for name in graph.outputs]


def onnx_node_cases() -> list[tuple[str, list[np.ndarray | None], dict[str, Any], tuple[int, ...]]]:
    rng = np.random.default_rng(6)
    x8, xu8 = int8(rng, (1, 4, 7, 6)), int8(rng, (1, 4, 7, 6), "uint8")
    w = int8(rng, (5, 4, 3, 3)) // 2  # 7-bit weights: onnxruntime's u8s8 AVX2 path saturates int16 pairs
    scales = (rng.random(5) * 0.01 + 0.001).astype(np.float32)
    bias = rng.integers(-500, 500, 5).astype(np.int32)
    xf = (rng.standard_normal((2, 3, 4)) * 5).astype(np.float32)
    a, b = int8(rng, (3, 11)), int8(rng, (11, 4)) // 2
    return [
        ("QuantizeLinear", [xf, np.float32(0.07), np.int8(-3)], {}, (1, 2)),
        (
            "QuantizeLinear",
            [xf, np.asarray([0.1, 0.05, 0.2], np.float32), np.asarray([1, 0, 9], np.uint8)],
            {"axis": 1},
            (1, 2),
        ),
        ("DequantizeLinear", [x8, np.float32(0.3), np.int8(4)], {}, (1, 2)),
        ("DequantizeLinear", [w, scales, np.zeros(5, np.int8)], {"axis": 0}, (1, 2)),
        # a per-tensor parameter written as shape [1] on a 1-D tensor (onnxruntime's bias DQ): not an axis
        ("DequantizeLinear", [bias, np.asarray([0.002], np.float32)], {}, (1,)),
        (
            "QLinearConv",
            [
                x8,
                np.float32(0.05),
                np.int8(3),
                w,
                scales,
                np.zeros(5, np.int8),
                np.float32(0.4),
                np.int8(-5),
                bias,
            ],
            {"pads": [1, 0, 1, 2], "strides": [2, 1]},
            (1, 2, 3, 4, 5, 6, 7, 8),
        ),
        (
            "QLinearConv",
            [
                xu8,
                np.float32(0.05),
                np.uint8(128),
                w,
                scales,
                np.zeros(5, np.int8),
                np.float32(0.4),
                np.uint8(100),
                bias,
            ],
            {"pads": [1, 1, 1, 1]},
            (1, 2, 3, 4, 5, 6, 7, 8),
        ),
        (
            "QLinearMatMul",
            [a, np.float32(0.1), np.int8(2), b, np.float32(0.02), np.int8(0), np.float32(0.3), np.int8(1)],
            {},
            (1, 2, 3, 4, 5, 6, 7),
        ),
        ("ConvInteger", [xu8, w, np.uint8(120)], {"pads": [1, 1, 1, 1]}, (1, 2)),
        ("MatMulInteger", [a, b, np.int8(3)], {}, (1, 2)),
    ]


@pytest.mark.parametrize("case", onnx_node_cases(), ids=lambda c: c[0])
@pytest.mark.parametrize("device", ["reference", "cpu"])
def test_quantized_onnx_ops_match_onnxruntime(case: tuple, device: str) -> None:
    op, inputs, attrs, constants = case
    model = node_model(op, inputs, attrs, constant_inputs=constants)
    feeds = feeds_of(model, inputs)
    (expected,) = run_onnxruntime(model, feeds)
    (actual,) = edgecnn_run(model, feeds, device)
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)


def float_model(rng: np.random.Generator) -> onnx.ModelProto:
    """Conv-Relu-MaxPool-Conv-Relu-Flatten-MatMul-Add, seeded weights."""

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Flatten", ["r2"], ["f"]),
        helper.make_node("MatMul", ["f", "w3"], ["m"]),
        helper.make_node("Add", ["m", "b3"], ["y"]),
    ]
    weights = [weight("w1", 6, 3, 3, 3), weight("b1", 6), weight("w2", 8, 6, 3, 3), weight("b2", 8)]
    weights += [weight("w3", 8 * 2 * 2, 5), weight("b3", 5)]
    graph = helper.make_graph(
        nodes,
        "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 11, 11])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("activation_type", ["int8", "uint8"])
def test_onnxruntime_quantized_model_matches(tmp_path: Any, activation_type: str) -> None:
    """A QOperator model made by onnxruntime.quantization runs in edgecnn with ORT's integers."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(7)
    onnx.save(float_model(rng), tmp_path / "float.onnx")
    samples = [{"x": rng.standard_normal((1, 3, 11, 11)).astype(np.float32)} for _ in range(6)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    quant_type = QuantType.QInt8 if activation_type == "int8" else QuantType.QUInt8
    quantize_static(
        str(tmp_path / "float.onnx"),
        str(tmp_path / "int8.onnx"),
        Reader(),
        quant_format=QuantFormat.QOperator,
        activation_type=quant_type,
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=activation_type == "uint8",  # 7-bit weights: no int16 saturation in ORT's u8s8 path
        op_types_to_quantize=["Conv", "MatMul"],
    )
    model = onnx.load(tmp_path / "int8.onnx")
    ops = {n.op_type for n in model.graph.node}
    assert {"QuantizeLinear", "QLinearConv", "QLinearMatMul", "DequantizeLinear"} <= ops
    graph = graph_from_model_proto(model, "int8.onnx")
    edgecnn_model = Model(graph, RuntimeOptions.resolve(threads=2))
    x = rng.standard_normal((1, 3, 11, 11)).astype(np.float32)
    kernels = {s.node.op: s.kernel.name for s in edgecnn_model.plan_for({"x": x}).steps}
    assert kernels["QLinearConv"] == conv_kernel(1) and kernels["QLinearMatMul"] == "int8_dense"
    (expected,) = run_onnxruntime(model, {"x": x})
    np.testing.assert_array_equal(edgecnn_model.run({"x": x})["y"], expected)
