"""QLinearConvAdd, an int8 ResNet block's convolution with its residual QLinearAdd: the reference
equals onnxruntime's QLinearConv then com.microsoft QLinearAdd on the same integers, and every CPU
kernel that takes the node (the Add in the dot-product GEMM's epilogue; the convolution then the
Add) equals the reference bit for bit: hypothesis over shapes, strides, both 8-bit types, the
operand order, ReLU, scales and zero points to their limits, 1 and 2 threads."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

from edgecnn.errors import EdgeCNNError
from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.int8.dot_kernel import available as dot_available
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.kernels.registry import candidate_kernels
from edgecnn.ops.quant_residual import QLinearConvAddAttrs
from edgecnn.testing import reference_run
from kernels.support import fast_run
from onnx_support import run_onnxruntime

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CONSTANTS = [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15]
"""Every input but the image (0) and the shortcut (9) is a plan-time constant."""


def codes(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def operands(
    rng: np.random.Generator,
    dtype: str,
    image: tuple[int, int, int, int],
    filters: int,
    kernel: int,
    stride: int,
    params: list[Any],
) -> tuple[list[np.ndarray], QLinearConvAddAttrs]:
    """The sixteen inputs of a QLinearConvAdd (``params``: the six scale/zero-point pairs of x, y,
    the shortcut, the Add's view of y and the output) and its convolution attributes."""
    x_s, x_z, y_s, y_z, s_s, s_z, a_s, a_z, o_s, o_z = params
    channels = image[1]
    w = rng.integers(-128, 128, (filters, channels, kernel, kernel)).astype(np.int8)
    w_s = (10 ** rng.uniform(-3, -1, filters)).astype(np.float32)
    bias = rng.integers(-5000, 5000, filters).astype(np.int32)
    pad = kernel // 2
    attrs = QLinearConvAddAttrs(strides=(stride, stride), pads=(pad,) * 4)
    out_h = (image[2] + 2 * pad - kernel) // stride + 1
    out_w = (image[3] + 2 * pad - kernel) // stride + 1
    shortcut = codes(rng, (image[0], filters, out_h, out_w), dtype)
    x = codes(rng, image, dtype)
    inputs = [x, x_s, x_z, w, w_s, np.zeros(filters, np.int8), y_s, y_z, bias, shortcut]
    return [*inputs, s_s, s_z, a_s, a_z, o_s, o_z], attrs


@st.composite
def parameters(draw: st.DrawFn, dtype: str) -> list[np.ndarray]:
    """Five (scale, zero point) pairs: scales over three decades, zero points to the limits."""
    info = np.iinfo(dtype)
    zero = st.one_of(st.sampled_from([info.min, info.max, 0]), st.integers(info.min, info.max))
    pairs = []
    for _ in range(5):
        pairs += [np.array(10 ** draw(st.floats(-3, 0)), np.float32), np.array(draw(zero), dtype)]
    return pairs


def onnxruntime_blocks(inputs: list[np.ndarray], attrs: QLinearConvAddAttrs) -> np.ndarray:
    """onnxruntime's QLinearConv then com.microsoft QLinearAdd (the convolution's output as A or B)."""
    names = [f"in{i}" for i in range(len(inputs))]
    conv = helper.make_node(
        "QLinearConv", names[:9], ["y"], strides=list(attrs.strides), pads=list(attrs.pads)
    )
    own, other = ["y", names[12], names[13]], names[9:12]
    add_inputs = own + other if attrs.conv_first else other + own
    add = helper.make_node("QLinearAdd", [*add_inputs, names[14], names[15]], ["z"], domain="com.microsoft")
    nodes = [conv, add]
    last = "z"
    if attrs.relu:  # QLinearAdd has no activation: the clamp at the output's zero point
        nodes.append(helper.make_node("Max", ["z", names[15]], ["r"]))
        last = "r"
    graph = helper.make_graph(
        nodes,
        "block",
        [
            helper.make_tensor_value_info(
                names[i], helper.np_dtype_to_tensor_dtype(inputs[i].dtype), inputs[i].shape
            )
            for i in (0, 9)
        ],
        [helper.make_empty_tensor_value_info(last)],
        [numpy_helper.from_array(np.asarray(inputs[i]), names[i]) for i in CONSTANTS],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    return run_onnxruntime(model, {"in0": inputs[0], "in9": inputs[9]})[0]


def every_kernel(inputs: list[np.ndarray], attrs: QLinearConvAddAttrs, threads: int) -> dict[str, np.ndarray]:
    """The output of every CPU kernel that takes the node, by name."""
    names = [f"in{i}" for i in range(len(inputs))]
    node = Node("QLinearConvAdd", "block", names, ["out"], attrs)
    types = [TensorType(str(x.dtype), x.shape) for x in inputs]
    values = [x if i in CONSTANTS else None for i, x in enumerate(inputs)]
    results = {}
    for entry in candidate_kernels(node, types, values):
        run = entry.factory(node, types, values)
        with cpu_threads(threads):
            results[entry.name] = np.asarray(run(*inputs))
    return results


@SETTINGS
@given(
    st.data(),
    st.sampled_from(["uint8", "int8"]),
    st.sampled_from([(1, 1), (3, 1), (3, 2), (1, 2)]),
    st.sampled_from([1, 2]),
)
def test_conv_add_equals_onnxruntime_and_every_kernel_the_reference(
    data: st.DataObject, dtype: str, window: tuple[int, int], threads: int
) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    kernel, stride = window
    image = (
        data.draw(st.integers(1, 2)),
        data.draw(st.integers(1, 19)),
        *data.draw(st.sampled_from([(5, 7), (9, 9), (14, 13)])),
    )
    filters = data.draw(st.integers(1, 21))
    inputs, attrs = operands(rng, dtype, image, filters, kernel, stride, data.draw(parameters(dtype)))
    attrs = QLinearConvAddAttrs(
        strides=attrs.strides,
        pads=attrs.pads,
        relu=data.draw(st.booleans()),
        conv_first=data.draw(st.booleans()),
    )
    expected = onnxruntime_blocks(inputs, attrs)
    np.testing.assert_array_equal(reference_run("QLinearConvAdd", attrs, inputs, CONSTANTS), expected)
    got = every_kernel(inputs, attrs, threads)
    assert set(got) >= {"int8_conv_add", *(["int8_dot_conv_add"] if dot_available() else [])}
    for name, out in got.items():
        assert out.dtype == expected.dtype, name
        np.testing.assert_array_equal(out, expected, err_msg=name)


def test_large_layer_over_threads_saturates_at_both_limits() -> None:
    """A layer large enough to be shared between threads (uneven tiles and panel chunks), its
    shortcut at the 8-bit limits, scales that push sums past both ends: every kernel equals the
    reference at 1 and 2 threads, and the plan picks the fused kernel."""
    rng = np.random.default_rng(7)
    for dtype in ("uint8", "int8"):
        info = np.iinfo(dtype)
        params = [np.array(s, np.float32) if k % 2 == 0 else np.array(s, dtype) for k, s in enumerate(
            [0.02, info.max // 2, 0.05, info.min + 3, 0.5, (info.min + info.max + 1) // 2, 0.05, info.min + 3, 0.03, info.max - 1]
        )]  # fmt: skip
        inputs, attrs = operands(rng, dtype, (1, 40, 29, 31), 37, 3, 1, params)
        inputs[9] = np.where(rng.random(inputs[9].shape) < 0.5, info.min, info.max).astype(dtype)
        expected = reference_run("QLinearConvAdd", attrs, inputs, CONSTANTS)
        assert {info.min, info.max} <= set(np.unique(expected).tolist())
        for threads in (1, 2):
            for name, out in every_kernel(inputs, attrs, threads).items():
                np.testing.assert_array_equal(out, expected, err_msg=f"{name}, {threads} thread(s)")
        got, kernel = fast_run("QLinearConvAdd", attrs, inputs, CONSTANTS, 2)
        assert kernel == ("int8_dot_conv_add" if dot_available() else "int8_conv_add")
        np.testing.assert_array_equal(got, expected)


def test_shortcut_of_another_shape_is_a_model_error() -> None:
    rng = np.random.default_rng(3)
    params = [np.array(0.05, np.float32), np.array(3, np.uint8)] * 5
    inputs, attrs = operands(rng, "uint8", (1, 4, 6, 6), 5, 3, 1, params)
    inputs[9] = inputs[9][:, :, :5]
    with pytest.raises(EdgeCNNError, match="shortcut"):
        fast_run("QLinearConvAdd", attrs, inputs, CONSTANTS, 1)
