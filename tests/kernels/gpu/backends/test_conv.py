"""Conv and FusedConv on every GPU-ish backend against the reference: im2col + GEMM, the 1x1
shortcut and the direct kernel, over random geometries (groups, strides, dilations, pads, SAME, 1-D)."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from edgecnn.kernels.gpu import conv as gpu_conv
from edgecnn.ops.common import AutoPad
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.fused import ACTIVATIONS, FusedConvAttrs
from kernels.gpu.backends.support import Backend, rand


def out_size(size: int, kernel: int, stride: int, dilation: int, pad: int) -> int:
    return (size + pad - (kernel - 1) * dilation - 1) // stride + 1


def test_conv2d_matches_reference(device: Backend) -> None:
    @settings(max_examples=device.pick(opencl=30, cuda=40), deadline=None)
    @given(
        n=st.integers(1, 2), groups=st.sampled_from([1, 1, 2, 3]), per_group=st.integers(1, 4),
        out_per_group=st.integers(1, 5), h=st.integers(1, 11), w=st.integers(1, 11), kh=st.integers(1, 4),
        kw=st.integers(1, 4), stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
        dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)), pads=st.tuples(*[st.integers(0, 2)] * 4),
        bias=st.booleans(), constant=st.booleans(), seed=st.integers(0, 99),
    )  # fmt: skip
    def check(
        n: int, groups: int, per_group: int, out_per_group: int, h: int, w: int, kh: int, kw: int,
        stride: tuple[int, int], dilation: tuple[int, int], pads: tuple[int, int, int, int], bias: bool,
        constant: bool, seed: int,
    ) -> None:  # fmt: skip
        assume(out_size(h, kh, stride[0], dilation[0], pads[0] + pads[2]) >= 1)
        assume(out_size(w, kw, stride[1], dilation[1], pads[1] + pads[3]) >= 1)
        rng = np.random.default_rng(seed)
        x = rand(rng, n, groups * per_group, h, w)
        weights = rand(rng, groups * out_per_group, per_group, kh, kw)
        b = rand(rng, groups * out_per_group) if bias else None
        attrs = ConvAttrs(strides=stride, dilations=dilation, pads=pads, group=groups)
        for forms in device.kernel_forms():
            with forms():
                device.check_node(
                    "Conv", attrs, [x, weights, b], (1, 2) if constant else (), magnitude=per_group * kh * kw
                )

    check()


CASES = [
    ((2, 6, 9, 9), (8, 6, 3, 3), ConvAttrs(pads=(1, 1, 1, 1)), "conv_im2col_gemm"),
    ((1, 16, 7, 5), (24, 16, 1, 1), ConvAttrs(), "conv_im2col_gemm"),  # 1x1: no im2col
    ((2, 32, 7, 5), (12, 16, 1, 1), ConvAttrs(group=2), "conv_im2col_gemm"),  # grouped 1x1
    ((2, 8, 7, 5), (12, 4, 1, 1), ConvAttrs(group=2), "conv_direct"),  # narrow groups
    ((1, 8, 10, 10), (8, 1, 3, 3), ConvAttrs(group=8, pads=(1, 1, 1, 1)), "conv_direct"),
    ((1, 6, 10, 10), (12, 1, 3, 3), ConvAttrs(group=6, strides=(2, 2)), "conv_direct"),
    ((1, 3, 11, 13), (4, 3, 3, 3), ConvAttrs(auto_pad=AutoPad.SAME_UPPER, strides=(2, 2)), None),
    ((1, 3, 11, 13), (4, 3, 2, 2), ConvAttrs(auto_pad=AutoPad.SAME_LOWER), None),
    ((2, 3, 17), (5, 3, 4), ConvAttrs(strides=(2,), pads=(1, 2)), "conv_im2col_gemm"),
    ((1, 4, 17), (4, 1, 3), ConvAttrs(group=4, dilations=(2,)), "conv_direct"),
]
OPENCL_CASES = [((1, 40, 30, 30), (64, 40, 3, 3), ConvAttrs(), "conv_im2col_gemm")]  # tiled GEMM
CUDA_CASES = [
    ((2, 64, 56, 56), (64, 64, 3, 3), ConvAttrs(pads=(1, 1, 1, 1)), "conv_im2col_gemm"),
    ((1, 3, 227, 227), (96, 3, 11, 11), ConvAttrs(strides=(4, 4)), "conv_im2col_gemm"),  # AlexNet conv1
]


@pytest.mark.per_backend(
    "x_shape, w_shape, attrs, kernel", opencl=CASES + OPENCL_CASES, cuda=CASES + CUDA_CASES
)
def test_conv_kernel_choice_and_result(
    device: Backend, x_shape: tuple[int, ...], w_shape: tuple[int, ...], attrs: ConvAttrs, kernel: str | None
) -> None:
    rng = np.random.default_rng(4)
    x, w, b = rand(rng, *x_shape), rand(rng, *w_shape), rand(rng, w_shape[0])
    taps = int(np.prod(w_shape[1:]))
    device.check_node("Conv", attrs, [x, w, b], (1, 2), kernel, magnitude=taps)


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("depthwise", [False, True])
def test_fused_conv_applies_every_activation(device: Backend, activation: str, depthwise: bool) -> None:
    rng = np.random.default_rng(5)
    x = 3 * rand(rng, 1, 4, 6, 7)
    w = rand(rng, 4, 1, 3, 3) if depthwise else rand(rng, 5, 4, 3, 3)
    attrs = FusedConvAttrs(
        group=4 if depthwise else 1,
        pads=(1, 1, 1, 1),
        activation=activation,
        negative_slope=0.1,
        low=-1,
        high=2,
    )
    kind = "direct" if depthwise else "im2col_gemm"
    device.check_node("FusedConv", attrs, [x, w, rand(rng, w.shape[0])], (1, 2), f"fused_conv_{kind}", 36)


def test_fused_pointwise_conv_without_bias(device: Backend) -> None:
    rng = np.random.default_rng(8)
    attrs = FusedConvAttrs(activation="clip", low=0.0, high=6.0)
    device.check_node("FusedConv", attrs, [3 * rand(rng, 2, 8, 5, 5), rand(rng, 16, 8, 1, 1)], (1,), None, 8)


def test_large_batches_are_processed_in_chunks_of_columns(device: Backend) -> None:
    """With a small column budget each image gets its own im2col + GEMM; results are unchanged."""
    rng = np.random.default_rng(6)
    x, w = rand(rng, 5, 3, 8, 8), rand(rng, 4, 3, 3, 3)
    per_image = 3 * 9 * 36 * 4
    with mock.patch.object(gpu_conv, "COLUMN_BUDGET", 2 * per_image):
        device.check_node("Conv", ConvAttrs(), [x, w], (1,), "conv_im2col_gemm", 27)


def test_three_dimensional_conv_falls_back_to_the_reference(device: Backend) -> None:
    rng = np.random.default_rng(7)
    _, kernel = device.run("Conv", ConvAttrs(), [rand(rng, 1, 2, 4, 4, 4), rand(rng, 3, 2, 2, 2, 2)], (1,))
    assert kernel == "reference"
