"""The 3x3 one-pass rows of pool_2d (ResNet/ShuffleNet/GoogLeNet max pools) and the per-worker
bordered buffers: NaN in every tap position, strides 1-3, ceil_mode, planes split over threads."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.kernels.cpu import threads as thread_budget
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from kernels.support import assert_matches, fast_run, reference_run


@pytest.mark.parametrize("tap", range(9))
def test_nan_in_any_tap_of_a_3x3_window(tap: int) -> None:
    x = np.random.default_rng(tap).standard_normal((1, 2, 7, 7)).astype(np.float32)
    x[0, 1, 1 + tap // 3, 1 + tap % 3] = np.nan  # inside window (1, 1) of stride 2, pad 1
    attrs = MaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))
    actual, kernel = fast_run("MaxPool", attrs, [x], (), 2)
    expected = reference_run("MaxPool", attrs, [x], ())
    assert kernel == "pool_2d" and np.isnan(actual[0, 1, 1, 1])
    assert_matches(actual, expected)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stride=st.integers(1, 3),
    pad=st.integers(0, 1),
    dilation=st.integers(1, 2),
    ceil_mode=st.booleans(),
    is_max=st.booleans(),
    shape=st.tuples(st.integers(1, 2), st.integers(1, 9), st.integers(5, 30), st.integers(5, 30)),
    seed=st.integers(0, 2**16),
)
def test_3x3_windows_on_two_threads(
    stride: int, pad: int, dilation: int, ceil_mode: bool, is_max: bool, shape: Any, seed: int
) -> None:
    common = {
        "kernel_shape": (3, 3),
        "strides": (stride, stride),
        "pads": (pad,) * 4,
        "dilations": (dilation, dilation),
        "ceil_mode": ceil_mode,
    }
    attrs = MaxPoolAttrs(**common) if is_max else AveragePoolAttrs(**common, count_include_pad=seed % 2 == 0)
    op = "MaxPool" if is_max else "AveragePool"
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    with mock.patch.object(thread_budget, "GRAIN", 0):
        actual, kernel = fast_run(op, attrs, [x], (), 2)
    assert kernel == "pool_2d"
    assert_matches(actual, reference_run(op, attrs, [x], ()), np.abs(x).max())


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("side", [2, 5, 8, 13])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_2x2_stride_2_reads_the_plane_directly(side: int, ceil_mode: bool, op: str) -> None:
    """Odd sides with ceil_mode make the last window leave the plane: the bordered path takes it."""
    x = np.random.default_rng(side).standard_normal((2, 3, side, side + 1)).astype(np.float32)
    x[1, 2, 0, 1] = np.nan
    common = {"kernel_shape": (2, 2), "strides": (2, 2), "ceil_mode": ceil_mode}
    attrs = MaxPoolAttrs(**common) if op == "MaxPool" else AveragePoolAttrs(**common)
    with mock.patch.object(thread_budget, "GRAIN", 0):
        actual, kernel = fast_run(op, attrs, [x], (), 2)
    assert kernel == "pool_2d"
    assert_matches(actual, reference_run(op, attrs, [x], ()), np.abs(np.nan_to_num(x)).max())
