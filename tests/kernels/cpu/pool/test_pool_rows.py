"""The paths inside pool_2d: rows reduced first (stride 1: the inner rows as one flat loop), columns
next (one flat loop over the plane where width == stride * OW, else per row), border columns from
their valid taps only, 2x2/2 windows read directly; NaN in every tap position, windows without
any tap in the input, and the serial twin of the parallel kernel."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.kernels.cpu.pool import loops as pool2d
from edgecnn.kernels.cpu.tuning_record import DEFAULT_CPU_TUNING
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run, tuned


def attrs_for(is_max: bool, count_include_pad: bool = False, **common: Any) -> Any:
    return (
        MaxPoolAttrs(**common) if is_max else AveragePoolAttrs(**common, count_include_pad=count_include_pad)
    )


def check(attrs: Any, x: np.ndarray, threads: int = 2) -> np.ndarray:
    op = "MaxPool" if isinstance(attrs, MaxPoolAttrs) else "AveragePool"
    with tuned(grain=0 if threads > 1 else DEFAULT_CPU_TUNING.grain):
        actual, kernel = fast_run(op, attrs, [x], (), threads)
    assert kernel == "pool_2d"
    finite = np.abs(x[np.isfinite(x)])
    assert_matches(actual, reference_run(op, attrs, [x], ()), finite.max() if finite.size else 1.0)
    return actual


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("tap", range(9))
def test_nan_in_any_tap_of_a_3x3_window(tap: int, stride: int) -> None:
    """Stride 1 (GoogLeNet's "same" pools: flat rows and columns) and 2 (ResNet's), pad 1."""
    x = np.random.default_rng(tap).standard_normal((1, 2, 8, 8)).astype(np.float32)
    x[0, 1, 1 + tap // 3, 1 + tap % 3] = np.nan  # in output (1, 1)'s window at stride 2, (2, 2)'s at 1
    attrs = MaxPoolAttrs(kernel_shape=(3, 3), strides=(stride, stride), pads=(1, 1, 1, 1))
    actual = check(attrs, x)
    assert np.isnan(actual[0, 1, 2 // stride, 2 // stride])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kernel=st.integers(1, 5),
    dilation=st.integers(1, 2),
    lead=st.integers(0, 4),
    is_max=st.booleans(),
    count_include_pad=st.booleans(),
    shape=st.tuples(st.integers(1, 2), st.integers(1, 5), st.integers(1, 16), st.integers(1, 16)),
    seed=st.integers(0, 2**16),
)
def test_same_pools_at_stride_1(
    kernel: int, dilation: int, lead: int, is_max: bool, count_include_pad: bool, shape: Any, seed: int
) -> None:
    """Output as wide as the input (pads summing to the window's extent - 1, split any way, as
    tiny-YOLO's 2x2/1 pads (0, 0, 1, 1)): the flat loops over the whole plane."""
    span = (kernel - 1) * dilation + 1
    begin = min(lead, span - 1)
    pads = (begin, begin, span - 1 - begin, span - 1 - begin)
    common = {"kernel_shape": (kernel, kernel), "dilations": (dilation, dilation), "pads": pads}
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    assert check(attrs_for(is_max, count_include_pad, **common), x).shape == shape


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kernel=st.integers(2, 4),
    stride=st.integers(2, 3),
    pad=st.integers(0, 1),
    ceil_mode=st.booleans(),
    is_max=st.booleans(),
    shape=st.tuples(st.integers(1, 2), st.integers(1, 5), st.integers(2, 30), st.integers(2, 30)),
    seed=st.integers(0, 2**16),
)
def test_strided_windows_on_even_and_odd_widths(
    kernel: int, stride: int, pad: int, ceil_mode: bool, is_max: bool, shape: Any, seed: int
) -> None:
    """Widths that are and are not stride * OW: the flat and the per-row column loops, with border
    columns on either side (pads, ceil_mode)."""
    common = {"kernel_shape": (kernel, kernel), "strides": (stride, stride), "pads": (pad,) * 4}
    height, width = shape[2:]
    if height + 2 * pad < kernel or width + 2 * pad < kernel:
        return
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    check(attrs_for(is_max, seed % 2 == 0, ceil_mode=ceil_mode, **common), x)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pads=st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2), st.integers(0, 2)),
    ceil_mode=st.booleans(),
    is_max=st.booleans(),
    count_include_pad=st.booleans(),
    shape=st.tuples(st.integers(1, 2), st.integers(1, 4), st.integers(1, 24), st.integers(1, 80)),
    special=st.sampled_from([None, np.nan, np.inf, -np.inf]),
    seed=st.integers(0, 2**16),
)
def test_3x3_stride_2_dealt_into_even_and_odd_columns(
    pads: tuple[int, ...],
    ceil_mode: bool,
    is_max: bool,
    count_include_pad: bool,
    shape: Any,
    special: Any,
    seed: int,
) -> None:
    """SqueezeNet's, GoogLeNet's and ResNet's 3x3/2 pools: any padding of either parity, ceil_mode's
    extra windows, rows wide enough for the vectorised pair loop, and NaN or infinities anywhere."""
    height, width = shape[2:]
    if height + pads[0] + pads[2] < 3 or width + pads[1] + pads[3] < 3:
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    if special is not None:
        x.reshape(-1)[rng.integers(0, x.size, 3)] = special
    common = {"kernel_shape": (3, 3), "strides": (2, 2), "pads": pads, "ceil_mode": ceil_mode}
    check(attrs_for(is_max, count_include_pad, **common), x, threads=1 + seed % 2)


@pytest.mark.parametrize("is_max", [True, False])
def test_windows_with_no_tap_inside_the_input(is_max: bool) -> None:
    """A dilated window can straddle a 1-pixel input: max of nothing is -inf, the average NaN."""
    x = np.array([[[[2.5]]]], np.float32)
    attrs = attrs_for(is_max, kernel_shape=(1, 2), dilations=(1, 3), pads=(0, 2, 0, 1))
    actual = check(attrs, x, threads=1)
    assert actual.shape == (1, 1, 1, 1)
    assert (actual == -np.inf).all() if is_max else np.isnan(actual).all()


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("side", [2, 5, 8, 13])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_2x2_stride_2_reads_the_plane_directly(side: int, ceil_mode: bool, op: str) -> None:
    """Odd sides with ceil_mode make the last window leave the plane: the general path takes it."""
    x = np.random.default_rng(side).standard_normal((2, 3, side, side + 1)).astype(np.float32)
    x[1, 2, 0, 1] = np.nan
    check(attrs_for(op == "MaxPool", kernel_shape=(2, 2), strides=(2, 2), ceil_mode=ceil_mode), x)


def test_serial_twin_is_the_same_code_without_a_parallel_region() -> None:
    """pool_2d_serial (small layers) is pool_2d's source compiled without parallel=True, under its
    own name so that numba's on-disk cache (keyed by name and bytecode) keeps the builds apart."""
    assert pool2d.pool_2d.py_func.__code__ is pool2d.pool_2d_serial.py_func.__code__
    assert pool2d.pool_2d.py_func.__qualname__ != pool2d.pool_2d_serial.py_func.__qualname__
    assert pool2d.pool_2d.targetoptions.get("parallel") and not pool2d.pool_2d_serial.targetoptions.get(
        "parallel"
    )
    x = np.random.default_rng(0).standard_normal((2, 5, 9, 11)).astype(np.float32)
    outs = []
    for kernel, workers in ((pool2d.pool_2d, 2), (pool2d.pool_2d_serial, 1)):
        out = np.empty((2, 5, 5, 6), np.float32)
        kernel(x, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, True, False, 1, 0.0, 0.0, 0.0, workers, out)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert (outs[0] >= 0).all()  # kind 1: ReLU applied


@pytest.mark.parametrize(
    ("shape", "attrs"),
    [
        ((1, 700, 7, 7), MaxPoolAttrs(kernel_shape=(3, 3), pads=(1, 1, 1, 1))),  # 334 planes per chunk
        ((2, 300, 9, 9), AveragePoolAttrs(kernel_shape=(3, 3), strides=(2, 2), ceil_mode=True)),
        (
            (1, 3, 130, 131),
            MaxPoolAttrs(kernel_shape=(3, 3), strides=(1, 1), pads=(1, 1, 1, 1)),
        ),  # 1 per chunk
    ],
)
def test_chunks_of_planes(shape: tuple[int, ...], attrs: Any) -> None:
    """Small planes are processed pool2d.SCRATCH_FLOATS floats of row reductions at a time: runs of
    planes that do not divide into the chunks, and planes too big for one."""
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    x[0, -1, -1, -1] = np.nan
    for threads in (1, 2):
        check(attrs, x, threads)


@pytest.mark.parametrize(
    ("shape", "attrs"),
    [
        (
            (1, 4, 27, 27),
            MaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2), ceil_mode=True),
        ),  # SqueezeNet's 27 -> 13
        ((1, 4, 55, 55), AveragePoolAttrs(kernel_shape=(3, 3), strides=(2, 2), ceil_mode=True)),
        ((2, 3, 14, 14), MaxPoolAttrs(kernel_shape=(2, 2))),  # 2x2/1 without padding: 14 -> 13
        (
            (1, 3, 13, 17),
            AveragePoolAttrs(kernel_shape=(3, 2), strides=(3, 3), pads=(1, 0, 1, 1), count_include_pad=True),
        ),
    ],
)
def test_rows_longer_than_the_output(shape: tuple[int, ...], attrs: Any) -> None:
    """Inputs wider than stride * OW: scratch rows padded to a multiple of the stride, pooled rows
    longer than OW, cut to OW when written out (with the average's division)."""
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    x[0, 0, 0, -1] = np.nan  # in the last column, which only the padded rows reach
    for threads in (1, 2):
        check(attrs, x, threads)
