"""MaxPool/AveragePool (pool_2d) and GlobalAveragePool/GlobalMaxPool (global_pool) against the numpy
reference: pads, ceil_mode, count_include_pad, dilations, SAME/VALID padding, odd sizes, NaN."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.kernels.cpu.gemm.microkernel import LANES
from edgecnn.kernels.cpu.pool.loops import global_pool_serial
from edgecnn.kernels.cpu.tuning_record import DEFAULT_CPU_TUNING
from edgecnn.ops.common import AutoPad
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.testing import ODD_SIZES, assert_matches, reference_run
from kernels.support import fast_run, tuned


@st.composite
def pool_cases(draw: st.DrawFn) -> dict[str, Any]:
    kernel = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    pads = tuple(draw(st.integers(0, min(2, spans[i % 2] - 1))) for i in range(4))  # pads < window
    auto_pad = AutoPad.NOTSET
    if draw(st.integers(0, 5)) == 0:
        auto_pad = draw(st.sampled_from([AutoPad.SAME_UPPER, AutoPad.SAME_LOWER, AutoPad.VALID]))
    padded = [pads[0] + pads[2], pads[1] + pads[3]] if auto_pad is AutoPad.NOTSET else [0, 0]
    if auto_pad in (AutoPad.SAME_UPPER, AutoPad.SAME_LOWER):
        padded = spans
    height = draw(st.integers(max(1, spans[0] - padded[0]), 19))
    width = draw(st.integers(max(1, spans[1] - padded[1]), 19))
    is_max = draw(st.booleans())
    common = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": pads if auto_pad is AutoPad.NOTSET else (),
        "dilations": dilations,
        "ceil_mode": draw(st.booleans()),
        "auto_pad": auto_pad,
    }
    attrs = (
        MaxPoolAttrs(**common)
        if is_max
        else AveragePoolAttrs(**common, count_include_pad=draw(st.booleans()))
    )
    return {
        "op": "MaxPool" if is_max else "AveragePool",
        "attrs": attrs,
        "shape": (draw(st.integers(1, 3)), draw(st.integers(1, 17)), height, width),
        "threads": draw(st.sampled_from([1, 2])),
        "seed": draw(st.integers(0, 2**16)),
    }


def check_pool(case: dict[str, Any]) -> None:
    x = np.random.default_rng(case["seed"]).standard_normal(case["shape"], dtype=np.float32)
    actual, kernel = fast_run(case["op"], case["attrs"], [x], (), case["threads"])
    assert kernel == "pool_2d"
    assert_matches(actual, reference_run(case["op"], case["attrs"], [x], ()), np.abs(x).max())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pool_cases())
def test_pool_2d_matches_reference(case: dict[str, Any]) -> None:
    check_pool(case)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pool_cases())
def test_pool_2d_on_two_threads(case: dict[str, Any]) -> None:
    case["threads"] = 2
    with tuned(grain=0):
        check_pool(case)


@pytest.mark.parametrize("size", ODD_SIZES)
def test_odd_sizes(size: int) -> None:
    for attrs, op in [
        (MaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2), ceil_mode=True), "MaxPool"),  # Caffe style
        (AveragePoolAttrs(kernel_shape=(2, 2), strides=(2, 2), pads=(1, 0, 1, 0)), "AveragePool"),
    ]:
        if size >= attrs.kernel_shape[0]:
            check_pool(
                {"op": op, "attrs": attrs, "shape": (1, size, size, size + 1), "threads": 2, "seed": size}
            )


def test_max_pool_propagates_nan() -> None:
    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, 1, 1] = np.nan
    attrs = MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2))
    actual, _ = fast_run("MaxPool", attrs, [x], (), 1)
    assert np.isnan(actual[0, 0, 0, 0]) and not np.isnan(actual[0, 0, 1]).any()
    assert_matches(actual, reference_run("MaxPool", attrs, [x], ()))


def test_integer_input_uses_the_reference() -> None:
    x = np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4)
    _, kernel = fast_run("MaxPool", MaxPoolAttrs(kernel_shape=(2, 2)), [x], (), 1)
    assert kernel == "reference"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    op=st.sampled_from(["GlobalAveragePool", "GlobalMaxPool"]),
    shape=st.lists(st.integers(1, 19), min_size=3, max_size=5),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_global_pools_match_reference(op: str, shape: list[int], threads: int, seed: int) -> None:
    x = (np.random.default_rng(seed).standard_normal(shape, dtype=np.float32) + 3).astype(np.float32)
    with tuned(grain=0 if threads == 2 else DEFAULT_CPU_TUNING.grain):
        actual, kernel = fast_run(op, NoAttrs(), [x], (), threads)
    assert kernel == "global_pool"
    assert_matches(actual, reference_run(op, NoAttrs(), [x], ()), np.abs(x).max())


@pytest.mark.parametrize("threads", [1, 2])
def test_global_pools_share_planes_and_propagate_nan(threads: int) -> None:
    """Seven planes over two workers (an uneven share) or one: a NaN in plane 3 makes its mean and
    max NaN and no other plane's; the rest match the reference."""
    x = np.random.default_rng(7).standard_normal((1, 7, 3, 5)).astype(np.float32)
    x[0, 3, 1, 2] = np.nan
    for op in ("GlobalAveragePool", "GlobalMaxPool"):
        with tuned(grain=0 if threads == 2 else DEFAULT_CPU_TUNING.grain):
            actual, kernel = fast_run(op, NoAttrs(), [x], (), threads)
        assert kernel == "global_pool"
        assert np.isnan(actual[0, 3]).all() and not np.isnan(np.delete(actual, 3, axis=1)).any()
        assert_matches(actual, reference_run(op, NoAttrs(), [x], ()), np.abs(np.nan_to_num(x)).max())


def test_global_average_of_planes_around_the_vector_width() -> None:
    """Planes of a masked partial vector only, of whole vectors, of both (7x7 and 14x14 maps): each
    mean is the float64 sum of its plane (to float32 rounding), and an infinity or a NaN in a
    plane's last, partial vector reaches its mean and no other plane's."""
    rng = np.random.default_rng(11)
    for size in (1, LANES - 1, LANES, LANES + 1, 49, 196):
        planes = (rng.standard_normal((5, size)) * 1e3).astype(np.float32)
        planes[1, -1] = np.inf
        planes[3, -1] = np.nan
        means = np.empty(5, np.float32)
        global_pool_serial(planes, False, means)
        expected = planes.astype(np.float64).mean(axis=1).astype(np.float32)
        np.testing.assert_allclose(means, expected, rtol=1e-6, atol=1e-3)
        assert means[1] == np.inf and np.isnan(means[3]) and np.isfinite(np.delete(means, [1, 3])).all()
