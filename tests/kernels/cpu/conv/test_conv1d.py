"""The 1-D convolution kernel (``conv_1d``) against the numpy reference: random shapes with odd
lengths, groups, strides, dilations, padding, every fused activation, with and without bias, on one
and two threads (the parallel twin forced by a zero grain)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.fused import ACTIVATIONS, FusedConvAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run, tuned


@st.composite
def conv_1d_cases(draw: st.DrawFn) -> dict:
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    per_group_in = draw(st.integers(1, 4))
    per_group_out = draw(st.integers(1, 9))  # 9: two blocks of 4 and a remainder
    taps, dilation, stride = draw(st.integers(1, 7)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    span = (taps - 1) * dilation + 1
    pad_begin, pad_end = draw(st.integers(0, span - 1)), draw(st.integers(0, span - 1))
    length = draw(st.integers(max(1, span - pad_begin - pad_end), 61))
    return {
        "x_shape": (draw(st.integers(1, 5)), groups * per_group_in, length),
        "w_shape": (groups * per_group_out, per_group_in, taps),
        "attrs": FusedConvAttrs(
            kernel_shape=(taps,),
            strides=(stride,),
            dilations=(dilation,),
            pads=(pad_begin, pad_end),
            group=groups,
            activation=draw(st.sampled_from(ACTIVATIONS)),
            negative_slope=0.2,
            low=-0.5,
            high=1.5,
        ),
        "bias": draw(st.booleans()),
        "threads": draw(st.sampled_from([1, 2])),
        "seed": draw(st.integers(0, 2**16)),
    }


def check(attrs: ConvAttrs, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, threads: int) -> None:
    inputs = [x, w, b]
    op = "FusedConv" if isinstance(attrs, FusedConvAttrs) else "Conv"
    with tuned(conv_gemm_grain=0 if threads == 2 else 1 << 20):
        actual, kernel = fast_run(op, attrs, inputs, (1, 2), threads)
    assert kernel == "conv_1d"
    expected = reference_run(op, attrs, inputs, (1, 2))
    magnitude = reference_run("Conv", ConvAttrs(**_conv_fields(attrs)), [np.abs(x), np.abs(w), None], (1,))
    assert_matches(actual, expected, magnitude + (0 if b is None else np.abs(b).max()))


def _conv_fields(attrs: ConvAttrs) -> dict:
    return {
        f: getattr(attrs, f) for f in ("kernel_shape", "strides", "pads", "dilations", "group", "auto_pad")
    }


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=conv_1d_cases())
def test_conv_1d_matches_reference(case: dict) -> None:
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x_shape"]).astype(np.float32)
    w = rng.standard_normal(case["w_shape"]).astype(np.float32)
    b = rng.standard_normal(case["w_shape"][0]).astype(np.float32) if case["bias"] else None
    check(case["attrs"], x, w, b, case["threads"])


def test_seed_003_layers_and_nan() -> None:
    """The radar network's two convolutions at batch 256 (many tasks per worker), and a NaN input
    reaching exactly the outputs whose windows read it."""
    rng = np.random.default_rng(3)
    for shape, channels in (((256, 1, 150), 6), ((256, 6, 71), 12)):
        x = rng.standard_normal(shape).astype(np.float32)
        x[7, 0, 40] = np.nan
        w = rng.standard_normal((channels, shape[1], 5)).astype(np.float32)
        b = rng.standard_normal(channels).astype(np.float32)
        check(ConvAttrs(kernel_shape=(5,)), x, w, b, 2)


def test_auto_pad_same() -> None:
    from edgecnn.ops.common import AutoPad

    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 23)).astype(np.float32)
    w = rng.standard_normal((5, 3, 4)).astype(np.float32)
    check(ConvAttrs(strides=(2,), auto_pad=AutoPad.SAME_LOWER), x, w, None, 1)


def test_non_contiguous_input() -> None:
    """A strided view as input (as a caller's array may be) gives the result of its copy."""
    from edgecnn.ir.graph import Node, TensorType
    from edgecnn.kernels.cpu.conv.conv1d import Conv1d

    rng = np.random.default_rng(6)
    wide = rng.standard_normal((2, 3, 40)).astype(np.float32)
    x, w = wide[:, :, ::2], rng.standard_normal((4, 3, 3)).astype(np.float32)
    node = Node("Conv", "c", ["x", "w"], ["y"], ConvAttrs())
    step = Conv1d(node, [TensorType("float32", x.shape), TensorType("float32", w.shape)], [None, w])
    np.testing.assert_array_equal(step(x), step(np.ascontiguousarray(x)))
