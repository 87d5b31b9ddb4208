"""Conv and FusedConv CPU kernels (im2col_gemm, gemm_1x1, depthwise) against the numpy reference:
random geometry with hypothesis, odd sizes, every fused activation, 1 and 2 threads, and the
packed-weight GEMM chosen where compiled code cannot call BLAS (tests/kernels/cpu/gemm/test_packed_gemm.py
has its own cases)."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv import direct_rows as conv_direct_rows
from edgecnn.kernels.cpu.conv import steps as conv_kernels
from edgecnn.kernels.cpu.conv.depthwise_lanes import lanes_layer
from edgecnn.kernels.cpu.conv.gemv import whole_window
from edgecnn.kernels.cpu.conv.im2col import NO_TAP_TABLE, tap_table
from edgecnn.kernels.cpu.conv.pixel_rows import rows_fit
from edgecnn.kernels.cpu.conv.setup import ConvSetup, conv_setup
from edgecnn.kernels.cpu.gemm import tiling
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS
from edgecnn.kernels.cpu.system import blas
from edgecnn.kernels.cpu.system import threads as thread_budget
from edgecnn.kernels.cpu.tuning_record import DEFAULT_CPU_TUNING
from edgecnn.ops.common import AutoPad
from edgecnn.ops.conv import ConvAttrs, conv
from edgecnn.ops.fused import ACTIVATIONS, FusedConvAttrs
from edgecnn.testing import ODD_SIZES, assert_matches, reference_run
from kernels.support import fast_run, tuned

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def activations(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(ACTIVATIONS))
    low = draw(st.floats(-2.0, 0.5))
    return {
        "activation": kind,
        "negative_slope": draw(st.floats(0.0, 0.5)),
        "low": low,
        "high": low + draw(st.floats(0.1, 3.0)),
    }


@st.composite
def conv_cases(draw: st.DrawFn) -> dict[str, Any]:
    """A valid 2-D convolution: groups incl. depthwise (with channel multiplier), 1x1 layers."""
    layout = draw(st.sampled_from(["dense", "grouped", "depthwise", "pointwise"]))
    if layout == "depthwise":
        group = draw(st.integers(2, 17))
        in_channels, out_channels = group, group * draw(st.integers(1, 2))
    else:
        group = draw(st.integers(2, 4)) if layout == "grouped" else 1
        in_channels = group * draw(st.integers(1, 17 // group))
        out_channels = group * draw(st.integers(1, 17 // group))
    if layout == "pointwise":
        kernel, strides, dilations, pads = (1, 1), (1, 1), (1, 1), (0, 0, 0, 0)
    else:
        kernel = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
        strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
        pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    auto_pad = AutoPad.NOTSET
    if layout != "pointwise" and draw(st.integers(0, 5)) == 0:
        auto_pad = draw(st.sampled_from([AutoPad.SAME_UPPER, AutoPad.SAME_LOWER, AutoPad.VALID]))
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    padded = [0, 0] if auto_pad is AutoPad.VALID else [pads[0] + pads[2], pads[1] + pads[3]]
    if auto_pad in (AutoPad.SAME_UPPER, AutoPad.SAME_LOWER):
        padded = spans  # SAME always leaves an output
    height = draw(st.integers(max(1, spans[0] - padded[0]), 19))
    width = draw(st.integers(max(1, spans[1] - padded[1]), 19))
    batch = draw(st.integers(1, 3))
    geometry = {
        "kernel_shape": kernel,
        "strides": strides,
        "dilations": dilations,
        "pads": pads if auto_pad is AutoPad.NOTSET else (),
        "group": group,
        "auto_pad": auto_pad,
    }
    return {
        "layout": layout,
        "x_shape": (batch, in_channels, height, width),
        "w_shape": (out_channels, in_channels // group, *kernel),
        "geometry": geometry,
        "bias": draw(st.booleans()),
        "activation": draw(activations()),
        "threads": draw(st.sampled_from([1, 2])),
        "seed": draw(st.integers(0, 2**16)),
    }


def expected_kernel(case: dict[str, Any]) -> str:
    """The heuristic: depthwise for group == C_in > 1, the in-place 1x1 kernel for ungrouped unpadded
    1x1 stride 1 up to MAX_DEPTH channels (or NARROW_DEPTH with few outputs, or any depth on maps of
    DEEP_MIN_PIXELS), direct GEMM for other
    unpadded 1x1 stride 1, the
    packed-weight GEMM for strided 1x1 (but the pixel-row GEMM, ahead of every kernel below the BLAS
    1x1 tiles, for deep layers on small maps), the direct kernel for shallow filters on full rows
    (with pixels as rows where that leaves fewer lanes empty, MICRO_KERNEL_OVER_BLAS; there also
    on every layer with few input channels and enough taps, or up to 64 on planes of whole pages,
    ahead of the pixel-row GEMM), else
    im2col + GEMM; where BLAS cannot be called, or the micro-kernel outruns it
    (MICRO_KERNEL_OVER_BLAS), the packed-weight GEMM instead of the BLAS kernels."""
    tiles = blas.AVAILABLE and not conv_kernels.micro_kernel_over_blas()
    geometry, channels = case["geometry"], case["x_shape"][1]
    if geometry.get("group", 1) == channels > 1:
        return "depthwise_lanes" if lanes_layer(_setup(case)) else "depthwise"
    if whole_window(_setup(case)):
        return "gemv"  # the window covers the whole input: a matrix-vector product per image
    same = geometry.get("auto_pad", AutoPad.NOTSET) is not AutoPad.NOTSET
    unpadded = same or not any(geometry.get("pads", ()))
    strided = geometry.get("strides", (1, 1)) != (1, 1)
    pointwise = geometry["kernel_shape"] == (1, 1) and not strided and unpadded
    if pointwise:
        outputs = case["w_shape"][0]
        narrow = channels <= DEFAULT_CPU_TUNING.narrow_depth and outputs <= DEFAULT_CPU_TUNING.narrow_outputs
        large_map = case["x_shape"][2] * case["x_shape"][3] >= DEFAULT_CPU_TUNING.deep_min_pixels
        if geometry.get("group", 1) == 1 and (
            channels <= DEFAULT_CPU_TUNING.pointwise_max_depth or narrow or large_map
        ):
            return "pointwise"  # the input read in place by the micro-kernel
        if tiles:
            return "gemm_1x1"
    shape = geometry["kernel_shape"]
    paged = channels <= DEFAULT_CPU_TUNING.paged_channels and conv_direct_rows.whole_pages(_setup(case))
    shallow = channels < DEFAULT_CPU_TUNING.shallow_channels or paged
    taps = channels * shape[0] * shape[1] >= DEFAULT_CPU_TUNING.min_tap_depth
    if (
        conv_kernels.micro_kernel_over_blas()
        and geometry.get("group", 1) == 1
        and shape != (1, 1)
        and shallow
        and taps
    ):
        return "direct_rows"  # shallow layers, whatever their width, and planes of whole pages
    if geometry.get("group", 1) == 1 and rows_fit(_setup(case)):
        return "pixel_rows"  # deep layers on small maps (below gemm_1x1, above the rest)
    if pointwise:
        return "packed_gemm"
    if geometry["kernel_shape"] == (1, 1) and strided:
        return "packed_gemm"  # strided 1x1: the packed kernel copies the subsample once
    if direct_fits(case):
        direct, rows = conv_direct_rows.lane_shares(_setup(case))
        ungrouped = geometry.get("group", 1) == 1
        return (
            "direct_rows"
            if conv_kernels.micro_kernel_over_blas() and rows > direct and ungrouped
            else "direct_gemm"
        )
    return "im2col_gemm" if tiles else "packed_gemm"


def _setup(case: dict[str, Any]) -> ConvSetup:
    types = [TensorType("float32", case["x_shape"]), TensorType("float32", case["w_shape"])]
    setup = conv_setup(Node("Conv", "c", ["x", "w"], ["y"], ConvAttrs(**case["geometry"])), types)
    assert setup is not None
    return setup


def direct_fits(case: dict[str, Any]) -> bool:
    """conv.when_direct's rule: shallow filters larger than 1x1 on maps whose rows fill the
    micro-kernel's runs of COLUMNS pixels, unless im2col copies shifted rows for the BLAS tiles
    (stride 1, output as wide as the input; not where MICRO_KERNEL_OVER_BLAS)."""
    setup = _setup(case)
    depth = case["w_shape"][1] * case["w_shape"][2] * case["w_shape"][3]
    runs = -(-setup.out[1] // COLUMNS) * COLUMNS
    shifted_rows = setup.strides == (1, 1) and setup.out[1] == setup.width
    if setup.kernel == (1, 1) or (shifted_rows and not conv_kernels.micro_kernel_over_blas()):
        return False
    return (
        depth <= DEFAULT_CPU_TUNING.max_direct_depth
        and setup.out[1] >= DEFAULT_CPU_TUNING.min_direct_fill * runs
    )


def check_conv(case: dict[str, Any]) -> str:
    """Run the case both ways, compare, and return the fast kernel's name."""
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x_shape"], dtype=np.float32)
    w = rng.standard_normal(case["w_shape"], dtype=np.float32)
    b = rng.standard_normal(case["w_shape"][0], dtype=np.float32) if case["bias"] else None
    plain = ConvAttrs(**case["geometry"])
    fused = case["activation"]["activation"] != "none"
    op, attrs = (
        ("FusedConv", FusedConvAttrs(**case["geometry"], **case["activation"])) if fused else ("Conv", plain)
    )
    inputs = [x, w] if b is None else [x, w, b]
    constants = tuple(range(1, len(inputs)))
    actual, kernel = fast_run(op, attrs, inputs, constants, case["threads"])
    expected = reference_run(op, attrs, inputs, constants)
    magnitude = conv(plain, np.abs(x), np.abs(w), None if b is None else np.abs(b)).max()
    assert_matches(actual, expected, magnitude)
    return kernel


@SETTINGS
@given(conv_cases())
def test_conv_kernels_match_reference(case: dict[str, Any]) -> None:
    assert check_conv(case) == expected_kernel(case)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_cases())
def test_blas_tiles_match_reference(case: dict[str, Any]) -> None:
    """The BLAS tiles where the rule gives them layers (AVX2); on AVX-512 the micro-kernel takes
    those layers unless MICRO_KERNEL_OVER_BLAS is off."""
    with tuned(micro_kernel_over_blas=False):
        assert check_conv(case) == expected_kernel(case)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_cases())
def test_blas_free_fallback_matches_reference(case: dict[str, Any]) -> None:
    """The packed-weight GEMM that replaces the BLAS tiles when BLAS cannot be called from numba."""
    with mock.patch.object(blas, "AVAILABLE", False):
        assert check_conv(case) == expected_kernel(case)


def odd_case(size: int, layout: str, threads: int) -> dict[str, Any]:
    depthwise = layout == "depthwise"
    channels = max(size, 2) if depthwise else size
    kernel = (1, 1) if layout == "pointwise" else (3, 3)
    pads = (0, 0, 0, 0) if layout == "pointwise" else (1, 1, 1, 1)
    return {
        "layout": layout,
        "x_shape": (1, channels, size, size + 2),
        "w_shape": (channels if depthwise else 5, 1 if depthwise else channels, *kernel),
        "geometry": {"kernel_shape": kernel, "pads": pads, "group": channels if depthwise else 1},
        "bias": True,
        "activation": {"activation": "relu"},
        "threads": threads,
        "seed": size,
    }


@pytest.mark.parametrize("layout", ["dense", "pointwise", "depthwise"])
@pytest.mark.parametrize("size", ODD_SIZES)
def test_odd_sizes(size: int, layout: str) -> None:
    for threads in (1, 2):
        case = odd_case(size, layout, threads)
        assert check_conv(case) == expected_kernel(case)


def test_large_layer_is_tiled_across_threads() -> None:
    """A layer big enough to be cut into several tiles per image (the cache-sized im2col tiles)."""
    case = odd_case(31, "dense", 2)
    case["x_shape"] = (2, 64, 40, 41)
    case["w_shape"] = (24, 64, 5, 5)  # 5x5: 3x3 stride-1 layers of this size go to Winograd
    case["geometry"] = {**case["geometry"], "kernel_shape": (5, 5), "pads": (2, 2, 2, 2)}
    with tuned(micro_kernel_over_blas=False):  # the BLAS tiles
        assert check_conv(case) == "im2col_gemm"
        case["threads"] = 1
        case["activation"] = {"activation": "clip", "low": 0.0, "high": 6.0}
        assert check_conv(case) == "im2col_gemm"


def test_runtime_weights_use_the_reference() -> None:
    """Weights that are graph inputs (not constants) are not packed: the reference kernel runs."""
    x = np.ones((1, 2, 5, 5), np.float32)
    w = np.ones((3, 2, 3, 3), np.float32)
    _, kernel = fast_run("Conv", ConvAttrs(), [x, w], (), 1)
    assert kernel == "reference"


def test_same_padding_is_resolved_per_input_shape() -> None:
    case = odd_case(13, "dense", 2)
    case["geometry"] = {"kernel_shape": (4, 4), "strides": (2, 2), "auto_pad": AutoPad.SAME_LOWER}
    case["w_shape"] = (5, 13, 4, 4)
    assert check_conv(case) == expected_kernel(case)
    case["geometry"] = {**case["geometry"], "auto_pad": AutoPad.SAME_UPPER}
    assert check_conv(case) == expected_kernel(case)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_cases())
def test_tiny_tiles_across_threads(case: dict[str, Any]) -> None:
    """Small layers cut into many narrow tiles on 2 threads: tile edges inside and across output rows."""
    case["threads"] = 2
    with (
        tuned(conv_gemm_grain=0),
        tuned(grain=0),
        mock.patch.object(tiling, "COLUMNS_BYTES", 256),
        mock.patch.object(tiling, "MIN_COLUMNS", 3),
        mock.patch.object(tiling, "MIN_ROWS", 1),
        tuned(micro_kernel_over_blas=False),  # the BLAS tiles' edges
    ):
        assert check_conv(case) == expected_kernel(case)


def test_serial_and_parallel_gemm_loops_are_one_function_compiled_twice() -> None:
    """conv_gemm_2d_serial is conv_gemm_2d's loop without a parallel region, under its own cache name
    (one name for both would let numba's on-disk cache hand one the other's machine code)."""
    from edgecnn.kernels.cpu.conv import tiled_gemm as conv_gemm

    parallel, serial = conv_gemm.conv_gemm_2d, conv_gemm.conv_gemm_2d_serial
    assert parallel.py_func.__code__ is serial.py_func.__code__
    assert parallel.py_func.__qualname__ != serial.py_func.__qualname__
    assert parallel.targetoptions.get("parallel") and not serial.targetoptions.get("parallel")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 9, 11), dtype=np.float32)
    weights = rng.standard_normal((1, 5, 6 * 9), dtype=np.float32)
    bias = rng.standard_normal(5, dtype=np.float32)
    taps = tap_table(9, 11, (3, 3), (1, 1), (1, 1), (1, 1), (9, 11))
    outputs = []
    for kernel in (parallel, serial):
        for table in (NO_TAP_TABLE, taps):  # im2col segment by segment, and through the tap table
            out = np.empty((2, 5, 9, 11), dtype=np.float32)
            columns = np.empty((2, 6 * 9, 40), dtype=np.float32)  # two workers, 40-pixel tiles
            with thread_budget.blas_single_threaded():
                kernel(
                    x, weights, bias, True, 3, 3, 1, 1, 1, 1, 1, 1, False, 1, 0.0, 0.0, 0.0, 5, 40, table,
                    columns, out,
                )  # fmt: skip
            outputs.append(out)
    for out in outputs[1:]:
        np.testing.assert_array_equal(outputs[0], out)
    expected = conv(ConvAttrs(pads=(1, 1, 1, 1)), x, weights.reshape(5, 6, 3, 3), bias)
    np.testing.assert_allclose(outputs[0], np.maximum(expected, 0), rtol=1e-4, atol=1e-4)


def test_wide_pointwise_layer_split_by_output_channels() -> None:
    """A 1x1 layer with more output channels than pixels is cut into row (channel) shares on two
    threads (tiling.prefer_rows); every share matches the reference, bias and activation included."""
    case = odd_case(9, "pointwise", 2)
    case["x_shape"] = (1, 40, 9, 9)
    case["w_shape"] = (150, 40, 1, 1)
    case["activation"] = {"activation": "relu"}
    with (
        tuned(conv_gemm_grain=0),
        # the BLAS tiles, not the in-place kernel
        tuned(pointwise_max_depth=0),
        tuned(narrow_depth=0),
        tuned(deep_min_pixels=1 << 30),
        tuned(micro_kernel_over_blas=False),
    ):
        assert check_conv(case) == "gemm_1x1"
