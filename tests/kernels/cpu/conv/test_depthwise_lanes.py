"""The channels-last depthwise kernel (conv/depthwise_lanes.py) against the numpy reference: every
filter size, stride, dilation, padding and fused activation on odd planes (smaller than a vector
and not a multiple of it, so both the transposing and the scalar copies run), partial channel
blocks, and whole EfficientNet-B0 / MobileNetV3 models against onnxruntime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgecnn
from edgecnn.bench.zoo import build_model
from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.depthwise_lanes import DepthwiseLanes, can_run_in_lanes
from edgecnn.kernels.cpu.gemm.microkernel import LANES
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.ops.conv import ConvAttrs, conv
from edgecnn.ops.fused import ACTIVATIONS, FusedConvAttrs
from edgecnn.testing import assert_matches, reference_run
from onnx_support import run_onnxruntime


def lanes_step(attrs: FusedConvAttrs, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> DepthwiseLanes:
    """The kernel prepared for the layer directly, whatever the selection would pick."""
    inputs = [x, w] if b is None else [x, w, b]
    node = Node("FusedConv", "dw", ["x", "w", "b"][: len(inputs)], ["y"], attrs)
    types = [TensorType("float32", a.shape) for a in inputs]
    values = [None, w] if b is None else [None, w, b]
    assert can_run_in_lanes(node, types, values)
    return DepthwiseLanes(node, types, values)


def check(attrs: FusedConvAttrs, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, threads: int) -> None:
    step = lanes_step(attrs, x, w, b)
    out = np.full(step.out_shape, np.nan, dtype=np.float32)
    with cpu_threads(threads):
        step.run_into(out, x)
    inputs = [x, w] if b is None else [x, w, b]
    expected = reference_run("FusedConv", attrs, inputs, list(range(1, len(inputs))))
    geometry = ConvAttrs(
        kernel_shape=attrs.kernel_shape,
        strides=attrs.strides,
        dilations=attrs.dilations,
        pads=attrs.pads,
        group=attrs.group,
    )
    magnitude = conv(geometry, np.abs(x), np.abs(w), None if b is None else np.abs(b))
    assert_matches(out, expected, np.maximum(magnitude, 1.0))


@st.composite
def layers(draw: st.DrawFn) -> dict[str, Any]:
    """A depthwise FusedConv: 3x3, 5x5, 7x7 or an odd filter, strides 1-3, dilation 1-2, padding up
    to 3 per side, 1 to 2.5 blocks of channels, planes from 1x1 to 17x19, any activation."""
    kernel = draw(st.sampled_from([(3, 3), (5, 5), (7, 7), (3, 3), (1, 1), (2, 4)]))
    strides = draw(st.sampled_from([(1, 1), (2, 2), (2, 2), (1, 2), (3, 3)]))
    dilations = draw(st.sampled_from([(1, 1), (1, 1), (2, 2)]))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    channels = draw(st.integers(2, 5 * LANES // 2))  # one channel is an ordinary convolution
    return {
        "x_shape": (
            draw(st.integers(1, 2)),
            channels,
            draw(st.integers(max(1, spans[0] - pads[0] - pads[2]), 17)),
            draw(st.integers(max(1, spans[1] - pads[1] - pads[3]), 19)),
        ),
        "attrs": FusedConvAttrs(
            kernel_shape=kernel,
            strides=strides,
            dilations=dilations,
            pads=pads,
            group=channels,
            activation=draw(st.sampled_from(ACTIVATIONS)),
            negative_slope=0.2,
            low=-0.5,
            high=1.5,
        ),
        "bias": draw(st.booleans()),
        "threads": draw(st.sampled_from([1, 2])),
        "seed": draw(st.integers(0, 2**16)),
    }


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers())
def test_matches_reference(case: dict[str, Any]) -> None:
    rng = np.random.default_rng(case["seed"])
    channels = case["x_shape"][1]
    x = rng.standard_normal(case["x_shape"], dtype=np.float32)
    w = rng.standard_normal((channels, 1, *case["attrs"].kernel_shape), dtype=np.float32)
    b = rng.standard_normal(channels, dtype=np.float32) if case["bias"] else None
    check(case["attrs"], x, w, b, case["threads"])


@pytest.mark.parametrize("activation", ["relu", "clip", "hard_swish", "silu"])
@pytest.mark.parametrize(
    ("kernel", "stride", "side"), [(3, 1, 7), (5, 1, 14), (5, 2, 14), (3, 2, 13), (7, 1, 7)]
)
def test_zoo_layer_shapes(activation: str, kernel: int, stride: int, side: int) -> None:
    """The layers EfficientNet-B0, MobileNetV3 and ConvNeXt run on 7x7 and 14x14 maps, with a partial
    last block of channels, on two threads."""
    rng = np.random.default_rng(kernel * side + stride)
    channels = 2 * LANES + 3
    x = rng.standard_normal((1, channels, side, side), dtype=np.float32)
    w = rng.standard_normal((channels, 1, kernel, kernel), dtype=np.float32)
    b = rng.standard_normal(channels, dtype=np.float32)
    pad = kernel // 2
    attrs = FusedConvAttrs(
        kernel_shape=(kernel, kernel),
        strides=(stride, stride),
        pads=(pad, pad, pad, pad),
        group=channels,
        activation=activation,
        low=0.0,
        high=6.0,
    )
    check(attrs, x, w, b, 2)


def test_extreme_values_stay_in_their_own_channel_and_pixel() -> None:
    """Infinities and NaN in one channel's pixel reach only the outputs whose windows read it (no
    lane, transposed block or overlapping last block of cells leaks them elsewhere)."""
    channels, side = LANES + 5, 9
    x = np.zeros((1, channels, side, side), dtype=np.float32)
    x[0, 3, 4, 4] = np.inf
    x[0, LANES + 2, 0, 8] = np.nan
    x[0, LANES + 4, 8, 0] = -np.inf
    w = np.ones((channels, 1, 3, 3), dtype=np.float32)
    attrs = FusedConvAttrs(kernel_shape=(3, 3), pads=(1, 1, 1, 1), group=channels, activation="relu")
    step = lanes_step(attrs, x, w, None)
    out = np.full(step.out_shape, -1.0, dtype=np.float32)
    step.run_into(out, x)
    expected = reference_run("FusedConv", attrs, [x, w], [1])
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("name", ["efficientnet-b0", "mobilenetv3-large"])
def test_zoo_model_matches_onnxruntime(name: str, tmp_path: Path) -> None:
    """A whole model whose small-map depthwise layers run here matches onnxruntime."""
    model: onnx.ModelProto = build_model(name, width=0.25, resolution=96)
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    net = edgecnn.load(path, threads=2)
    (input_name,) = [i.name for i in net.inputs]
    x = np.random.default_rng(5).standard_normal((2, 3, 96, 96), dtype=np.float32)
    kernels = [s.kernel.name for s in net.plan_for({input_name: x}).steps]
    assert kernels.count("depthwise_lanes") >= 7  # the fewest: MobileNetV3 with 8-float vectors
    (expected,) = run_onnxruntime(model, {input_name: x})
    assert_matches(net(x), expected, 1.0)
