"""The depthwise step on every filter size, stride, padding, dilation and fused activation against
the numpy reference (the banded pass for 5x5, 7x7 and the other non-3x3 filters, the 3x3 paths
beside it; the layers depthwise_lanes.lanes_layer picks go there), bands cut at every row count,
and the epilogue's sigmoid and SiLU at the edges."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.depthwise import depthwise_conv_2d
from edgecnn.kernels.cpu.conv.depthwise_lanes import lanes_layer
from edgecnn.kernels.cpu.conv.setup import conv_setup
from edgecnn.kernels.cpu.gemm.epilogue import ActivationKind, activate_in_place
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.ops.conv import ConvAttrs, conv
from edgecnn.ops.fused import ACTIVATIONS, FusedConvAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run

KERNELS = [(5, 5), (7, 7), (3, 3), (5, 5), (7, 7), (1, 1), (2, 4), (4, 2), (7, 1), (1, 6), (9, 9)]


def spec(a: np.ndarray) -> TensorType:
    return TensorType("float32", a.shape)


@st.composite
def layers(draw: st.DrawFn) -> dict[str, Any]:
    """A depthwise FusedConv: a filter from KERNELS, strides 1-3 (2 most often), dilation 1-2,
    padding up to 3 per side, multiplier 1-2, any activation, odd and even plane sizes."""
    kernel = draw(st.sampled_from(KERNELS))
    strides = draw(st.sampled_from([(1, 1), (2, 2), (2, 2), (1, 2), (3, 3)]))
    dilations = draw(st.sampled_from([(1, 1), (1, 1), (2, 2), (1, 2)]))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    channels = draw(st.integers(2, 9))  # one channel is an ordinary convolution
    return {
        "x_shape": (
            draw(st.integers(1, 2)),
            channels,
            draw(st.integers(max(1, spans[0] - pads[0] - pads[2]), 29)),
            draw(st.integers(max(1, spans[1] - pads[1] - pads[3]), 29)),
        ),
        "out_channels": channels * draw(st.integers(1, 2)),
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


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers())
def test_depthwise_step_matches_reference(case: dict[str, Any]) -> None:
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x_shape"], dtype=np.float32)
    w = rng.standard_normal((case["out_channels"], 1, *case["attrs"].kernel_shape), dtype=np.float32)
    b = rng.standard_normal(case["out_channels"], dtype=np.float32) if case["bias"] else None
    inputs = [x, w] if b is None else [x, w, b]
    constants = list(range(1, len(inputs)))
    actual, kernel = fast_run("FusedConv", case["attrs"], inputs, constants, case["threads"])
    expected = reference_run("FusedConv", case["attrs"], inputs, constants)
    geometry = ConvAttrs(
        kernel_shape=case["attrs"].kernel_shape,
        strides=case["attrs"].strides,
        dilations=case["attrs"].dilations,
        pads=case["attrs"].pads,
        group=case["attrs"].group,
    )
    setup = conv_setup(Node("FusedConv", "dw", ["x", "w"], ["y"], case["attrs"]), [spec(x), spec(w)])
    assert setup is not None
    assert kernel == ("depthwise_lanes" if lanes_layer(setup) else "depthwise")
    magnitude = conv(geometry, np.abs(x), np.abs(w), None if b is None else np.abs(b))
    assert_matches(actual, expected, np.maximum(magnitude, 1.0))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kernel=st.sampled_from([(5, 5), (7, 7), (4, 6)]),
    stride=st.sampled_from([1, 2]),
    band_floats=st.integers(1, 200),
    side=st.integers(5, 30),
    workers=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_bands_of_any_row_count(
    kernel: tuple[int, int], stride: int, band_floats: int, side: int, workers: int, seed: int
) -> None:
    """The banded pass cut into bands of one row up to the whole plane gives the same output."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 3, side, side + 1), dtype=np.float32)
    w = rng.standard_normal((3, *kernel), dtype=np.float32)
    b = rng.standard_normal(3, dtype=np.float32)
    pads = (kernel[0] // 2, kernel[1] // 2, kernel[0] // 2, kernel[1] // 2)
    oh = (side + pads[0] + pads[2] - kernel[0]) // stride + 1
    ow = (side + 1 + pads[1] + pads[3] - kernel[1]) // stride + 1
    out = np.full((1, 3, oh, ow), np.nan, dtype=np.float32)
    relu = int(ActivationKind.RELU)
    with cpu_threads(2):
        depthwise_conv_2d(
            x,
            w,
            b,
            True,
            stride,
            stride,
            pads[0],
            pads[1],
            1,
            1,
            relu,
            0.0,
            0.0,
            0.0,
            band_floats,
            workers,
            out,
        )
    attrs = ConvAttrs(kernel_shape=kernel, strides=(stride, stride), pads=pads, group=3)
    expected = np.maximum(conv(attrs, x, w[:, None], b), 0.0)
    magnitude = conv(attrs, np.abs(x), np.abs(w[:, None]), np.abs(b))
    assert_matches(out, expected, magnitude)


def test_sigmoid_and_silu_epilogues_at_the_edges() -> None:
    """Sigmoid and SiLU through the vector epilogue agree with float64 on the whole range, and keep
    the reference's NaN, infinities and signed saturation."""
    x = np.concatenate(
        [
            np.linspace(-120.0, 120.0, 4001, dtype=np.float32),
            np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.0, -88.0, 1e-30, -1e-30]),
        ]
    )
    with np.errstate(invalid="ignore", over="ignore"):
        exact = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
        silu = x * exact  # -inf * 0 is NaN, as in the reference
    for kind, expected in ((ActivationKind.SIGMOID, exact), (ActivationKind.SILU, silu)):
        out = x.copy()
        activate_in_place(out, np.uint64(0), np.uint64(x.size), int(kind), 0.0, 0.0, 0.0)
        wanted = expected.astype(np.float32)
        assert_matches(out, wanted, np.abs(wanted))
