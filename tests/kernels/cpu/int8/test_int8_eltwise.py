"""The 8-bit ops between an int8 network's layers (QLinearAdd, QLinearGlobalAveragePool,
QLinearAveragePool, QLinearConcat, QLinearLeakyRelu, MaxPool on 8-bit data): each reference in edgecnn.ops.quant equals
onnxruntime's com.microsoft operator on the same integers, and each compiled kernel equals the
reference, with hypothesis over shapes, types, scales and zero points (their limits included)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

from edgecnn.errors import EdgeCNNError
from edgecnn.ops.activation import LeakyReluAttrs
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from edgecnn.ops.quant import QLinearAddAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import ConcatAttrs
from edgecnn.testing import reference_run
from kernels.support import fast_run
from onnx_support import feeds_of, node_model, run_onnxruntime

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def microsoft_model(
    op: str, inputs: list[Any], attrs: dict[str, Any], constants: list[int]
) -> onnx.ModelProto:
    """One com.microsoft node (onnxruntime's integer operators) reading ``inputs``."""
    model = node_model(op, inputs, attrs, opset=17, constant_inputs=constants)
    model.graph.node[0].domain = "com.microsoft"
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def onnxruntime_output(op: str, inputs: list[Any], attrs: dict[str, Any], constants: list[int]) -> np.ndarray:
    model = microsoft_model(op, inputs, attrs, constants)
    return run_onnxruntime(model, feeds_of(model, inputs))[0]


def codes(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


@st.composite
def parameters(draw: st.DrawFn, dtype: str, count: int) -> list[np.ndarray]:
    """``count`` (scale, zero point) pairs: scales over four decades, zero points to the limits."""
    info = np.iinfo(dtype)
    zero = st.one_of(st.sampled_from([info.min, info.max, 0]), st.integers(info.min, info.max))
    pairs = []
    for _ in range(count):
        scale = np.array(10 ** draw(st.floats(-4, 0)), np.float32)
        pairs += [scale, np.array(draw(zero), dtype)]
    return pairs


SHAPE_PAIRS = [
    ((1, 8, 5, 7), (1, 8, 5, 7)),
    ((2, 3, 33), (2, 3, 33)),  # odd lengths: the vector tail
    ((1, 8, 5, 7), (1, 8, 1, 1)),  # one value per channel: broadcast, a scalar per run
    ((1,), (2, 3, 33)),
    ((3, 1), (3, 70)),
]


@SETTINGS
@given(st.data(), st.sampled_from(["uint8", "int8"]), st.sampled_from(SHAPE_PAIRS), st.sampled_from([1, 2]))
def test_qlinear_add_equals_onnxruntime_and_the_kernel_the_reference(
    data: st.DataObject, dtype: str, shapes: tuple[tuple[int, ...], ...], threads: int
) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    a_s, a_z, b_s, b_z, y_s, y_z = data.draw(parameters(dtype, 3))
    a, b = codes(rng, shapes[0], dtype), codes(rng, shapes[1], dtype)
    inputs = [a, a_s, a_z, b, b_s, b_z, y_s, y_z]
    constants = [1, 2, 4, 5, 6, 7]
    expected = onnxruntime_output("QLinearAdd", inputs, {}, constants)
    reference = reference_run("QLinearAdd", QLinearAddAttrs(), inputs, constants)
    np.testing.assert_array_equal(reference, expected)
    got, kernel = fast_run("QLinearAdd", QLinearAddAttrs(), inputs, constants, threads)
    assert kernel == ("int8_add" if shapes[0] == shapes[1] else "reference")
    np.testing.assert_array_equal(got, expected)
    relu, _ = fast_run("QLinearAdd", QLinearAddAttrs("relu"), inputs, constants, threads)
    np.testing.assert_array_equal(relu, np.maximum(expected, y_z))


def test_qlinear_add_rounds_where_onnxruntime_does() -> None:
    """A tie found in a ResNet-18 block: a - za and b - zb scaled and summed is 98.50003 unless the
    constant term is fused as onnxruntime's compiled kernel fuses it (98.5, rounded to even: 98)."""
    s = {"a": 0.08809802, "b": 0.12860332, "y": 0.068364814}
    a, b = np.full((1, 40), 165, np.uint8), np.full((1, 40), 149, np.uint8)
    inputs = [a, np.array(s["a"], np.float32), np.array(109, np.uint8), b, np.array(s["b"], np.float32)]
    inputs += [np.array(135, np.uint8), np.array(s["y"], np.float32), np.array(0, np.uint8)]
    constants = [1, 2, 4, 5, 6, 7]
    expected = onnxruntime_output("QLinearAdd", inputs, {}, constants)
    np.testing.assert_array_equal(expected, 98)
    np.testing.assert_array_equal(reference_run("QLinearAdd", QLinearAddAttrs(), inputs, constants), expected)
    np.testing.assert_array_equal(
        fast_run("QLinearAdd", QLinearAddAttrs(), inputs, constants, 1)[0], expected
    )


def test_qlinear_add_saturates_at_both_limits() -> None:
    for dtype in ("uint8", "int8"):
        info = np.iinfo(dtype)
        a = np.array([[info.max] * 40 + [info.min] * 40], dtype)
        s, z = np.array(1.0, np.float32), np.array(0, dtype)
        inputs = [a, s, z, a.copy(), s, z, np.array(0.01, np.float32), z]
        got, kernel = fast_run("QLinearAdd", QLinearAddAttrs(), inputs, [1, 2, 4, 5, 6, 7], 1)
        assert kernel == "int8_add"
        np.testing.assert_array_equal(got, [[info.max] * 40 + [info.min] * 40])


@SETTINGS
@given(
    st.data(),
    st.sampled_from(["uint8", "int8"]),
    st.sampled_from([(1, 5, 7, 7), (2, 19, 3, 1), (1, 8, 1, 1)]),
)
def test_qlinear_global_average_pool(data: st.DataObject, dtype: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x_s, x_z = data.draw(parameters(dtype, 1))
    y_s = np.array(x_s * np.float32(10 ** data.draw(st.floats(-1.5, 1.5))), np.float32)
    y_z = data.draw(parameters(dtype, 1))[1]
    inputs = [codes(rng, shape, dtype), x_s, x_z, y_s, y_z]
    constants = [1, 2, 3, 4]
    expected = onnxruntime_output("QLinearGlobalAveragePool", inputs, {}, constants)
    np.testing.assert_array_equal(
        reference_run("QLinearGlobalAveragePool", NoAttrs(), inputs, constants), expected
    )
    got, kernel = fast_run("QLinearGlobalAveragePool", NoAttrs(), inputs, constants, 2)
    assert kernel == "int8_global_average_pool"
    np.testing.assert_array_equal(got, expected)


@SETTINGS
@given(st.data(), st.sampled_from(["uint8", "int8"]), st.sampled_from([1, 2, -1]), st.integers(1, 3))
def test_qlinear_concat(data: st.DataObject, dtype: str, axis: int, parts: int) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    y_s, y_z = data.draw(parameters(dtype, 1))
    inputs: list[Any] = [y_s, y_z]
    for i in range(parts):
        shape = [2, 3, 5, 4]
        shape[axis] = 1 + 3 * i
        x_s, x_z = (y_s, y_z) if data.draw(st.booleans()) else data.draw(parameters(dtype, 1))  # a copy
        inputs += [codes(rng, tuple(shape), dtype), x_s, x_z]
    constants = [i for i in range(len(inputs)) if i % 3 != 2]
    attrs = ConcatAttrs(axis=axis)
    expected = onnxruntime_output("QLinearConcat", inputs, {"axis": axis}, constants)
    np.testing.assert_array_equal(reference_run("QLinearConcat", attrs, inputs, constants), expected)
    got, kernel = fast_run("QLinearConcat", attrs, inputs, constants, 2)
    assert kernel == "int8_concat"
    np.testing.assert_array_equal(got, expected)


@SETTINGS
@given(st.data(), st.sampled_from(["uint8", "int8"]), st.sampled_from([0.1, 0.01, 1.5]))
def test_qlinear_leaky_relu(data: st.DataObject, dtype: str, alpha: float) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x_s, x_z, y_s, y_z = data.draw(parameters(dtype, 2))
    inputs = [codes(rng, (1, 3, 9, 11), dtype), x_s, x_z, y_s, y_z]
    constants = [1, 2, 3, 4]
    expected = onnxruntime_output("QLinearLeakyRelu", inputs, {"alpha": alpha}, constants)
    attrs = LeakyReluAttrs(alpha=alpha)
    np.testing.assert_array_equal(reference_run("QLinearLeakyRelu", attrs, inputs, constants), expected)
    got, kernel = fast_run("QLinearLeakyRelu", attrs, inputs, constants, 1)
    assert kernel == "int8_table"
    np.testing.assert_array_equal(got, expected)


AVERAGE_POOLS = [
    ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, (1, 3, 9, 8)),
    ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}, (1, 3, 9, 8)),
    ({"kernel_shape": [2, 3], "strides": [2, 1], "ceil_mode": 1}, (2, 2, 7, 9)),  # partial windows
    ({"kernel_shape": [7, 7], "strides": [1, 1]}, (1, 17, 7, 7)),  # a global average as a window
]


@SETTINGS
@given(st.data(), st.sampled_from(["uint8", "int8"]), st.sampled_from(AVERAGE_POOLS))
def test_qlinear_average_pool(
    data: st.DataObject, dtype: str, case: tuple[dict[str, Any], tuple[int, ...]]
) -> None:
    onnx_attrs, shape = case
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x_s, x_z, y_s, y_z = data.draw(parameters(dtype, 2))
    inputs = [codes(rng, shape, dtype), x_s, x_z, y_s, y_z]
    constants = [1, 2, 3, 4]
    expected = onnxruntime_output("QLinearAveragePool", inputs, onnx_attrs, constants)
    attrs = AveragePoolAttrs(
        kernel_shape=tuple(onnx_attrs["kernel_shape"]),
        strides=tuple(onnx_attrs["strides"]),
        pads=tuple(onnx_attrs.get("pads", ())),
        ceil_mode=bool(onnx_attrs.get("ceil_mode", 0)),
        count_include_pad=bool(onnx_attrs.get("count_include_pad", 0)),
    )
    np.testing.assert_array_equal(reference_run("QLinearAveragePool", attrs, inputs, constants), expected)
    got, kernel = fast_run("QLinearAveragePool", attrs, inputs, constants, 2)
    assert kernel == "int8_average_pool"
    np.testing.assert_array_equal(got, expected)


POOLS = [
    ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, (1, 4, 13, 12)),  # ResNet's stem
    ({"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, (2, 3, 7, 9)),  # partial windows
    ({"kernel_shape": [3, 2], "strides": [1, 2], "dilations": [2, 1], "pads": [0, 1, 2, 0]}, (1, 2, 9, 8)),
]


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize(("onnx_attrs", "shape"), POOLS)
def test_max_pool_on_8bit_data(dtype: str, onnx_attrs: dict[str, Any], shape: tuple[int, ...]) -> None:
    x = codes(np.random.default_rng(7), shape, dtype)
    x.flat[::5] = np.iinfo(dtype).min  # windows of the lowest value only: padding must not win
    model = node_model("MaxPool", [x], onnx_attrs, opset=17)
    expected = run_onnxruntime(model, feeds_of(model, [x]))[0]
    attrs = MaxPoolAttrs(
        kernel_shape=tuple(onnx_attrs["kernel_shape"]),
        strides=tuple(onnx_attrs["strides"]),
        pads=tuple(onnx_attrs.get("pads", (0, 0, 0, 0))),
        dilations=tuple(onnx_attrs.get("dilations", (1, 1))),
        ceil_mode=bool(onnx_attrs.get("ceil_mode", 0)),
    )
    np.testing.assert_array_equal(reference_run("MaxPool", attrs, [x]), expected)
    got, kernel = fast_run("MaxPool", attrs, [x], [], 2)
    assert kernel == "int8_max_pool"
    np.testing.assert_array_equal(got, expected)


@st.composite
def max_pool_cases(draw: st.DrawFn) -> tuple[MaxPoolAttrs, np.ndarray, int]:
    """A MaxPool on random 8-bit codes (runs of the type's limits among them): windows 1-4 wide
    along each axis, strides 1-3, dilations 1-2, pads up to the window's reach on every side,
    ceil_mode, odd and tiny planes. Half of them are the models' pools (3x3 at stride 1 or 2, padded
    or not, 2x2 at stride 2), where even widths make input rows one or two output rows long (the
    passes over several planes at once)."""
    dtype = draw(st.sampled_from(["uint8", "int8"]))
    if draw(st.booleans()):
        pads: tuple[int, ...] = draw(st.sampled_from([(0, 0, 0, 0), (1, 1, 1, 1), (0, 1, 1, 0)]))
        kernel = draw(st.sampled_from([(3, 3), (2, 2)]))
        strides, dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2))), (1, 1)
    else:
        kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
        strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
        reach = [(k - 1) * d for k, d in zip(kernel, dilations, strict=True)]
        pads = tuple(draw(st.integers(0, reach[i % 2])) for i in range(4))
    ceil_mode = draw(st.booleans())
    reach = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    height = draw(st.integers(max(1, reach[0] - pads[0] - pads[2]), 13))
    width = draw(st.integers(max(1, reach[1] - pads[1] - pads[3]), 13))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), height, width)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = codes(rng, shape, dtype)
    x[rng.random(shape) < draw(st.sampled_from([0.0, 0.5, 0.9]))] = info.min
    x[rng.random(shape) < 0.05] = info.max
    attrs = MaxPoolAttrs(
        kernel_shape=kernel, strides=strides, pads=pads, dilations=dilations, ceil_mode=ceil_mode
    )
    return attrs, x, draw(st.integers(1, 2))


@SETTINGS
@given(max_pool_cases())
def test_max_pool_on_8bit_data_equals_the_reference(case: tuple[MaxPoolAttrs, np.ndarray, int]) -> None:
    attrs, x, threads = case
    got, kernel = fast_run("MaxPool", attrs, [x], [], threads)
    assert kernel == "int8_max_pool"
    np.testing.assert_array_equal(got, reference_run("MaxPool", attrs, [x]))


def test_bad_parameters_are_model_errors() -> None:
    a = np.zeros((1, 4), np.uint8)
    per_channel = np.full(4, 0.1, np.float32)
    s, z = np.array(0.1, np.float32), np.array(0, np.uint8)
    with pytest.raises(EdgeCNNError, match="per tensor"):
        reference_run("QLinearAdd", QLinearAddAttrs(), [a, per_channel, z, a, s, z, s, z], [1, 2, 4, 5, 6, 7])
    with pytest.raises(EdgeCNNError, match="8-bit type"):
        reference_run(
            "QLinearAdd", QLinearAddAttrs(), [a, s, z, a.view(np.int8), s, z, s, z], [1, 2, 4, 5, 6, 7]
        )
    with pytest.raises(ValueError, match="relu"):
        QLinearAddAttrs("sigmoid")
