"""LRN (kernel "lrn") against the numpy reference: window sizes odd and even, beta 0.75 (the square
root path) and others, ranks 2 to 5, channel counts around the window size."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.kernels.cpu import lrn as lrn_kernels
from edgecnn.kernels.cpu.tuning_record import DEFAULT_CPU_TUNING
from edgecnn.ops.norm import LRNAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run, tuned


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    size=st.integers(1, 7),
    alpha=st.sampled_from([1e-4, 0.5, 2.0]),
    beta=st.sampled_from([0.75, 0.5, 1.3]),
    bias=st.sampled_from([1.0, 2.0, 0.5]),
    shape=st.lists(st.integers(1, 17), min_size=2, max_size=5),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_lrn_matches_reference(
    size: int, alpha: float, beta: float, bias: float, shape: list[int], threads: int, seed: int
) -> None:
    x = (np.random.default_rng(seed).standard_normal(shape) * 3).astype(np.float32)
    attrs = LRNAttrs(size=size, alpha=alpha, beta=beta, bias=bias)
    with (
        tuned(grain=0 if threads == 2 else DEFAULT_CPU_TUNING.grain),
        mock.patch.object(lrn_kernels, "PIXEL_BLOCK", 5),
    ):
        actual, kernel = fast_run("LRN", attrs, [x], (), threads)
    assert kernel == "lrn"
    assert_matches(actual, reference_run("LRN", attrs, [x], ()), np.abs(x).max())


def test_alexnet_norm1_shape() -> None:
    x = np.random.default_rng(0).standard_normal((1, 96, 55, 55)).astype(np.float32) * 50
    attrs = LRNAttrs(size=5, alpha=1e-4, beta=0.75, bias=1.0)
    actual, _ = fast_run("LRN", attrs, [x], (), 2)
    assert_matches(actual, reference_run("LRN", attrs, [x], ()), np.abs(x).max())
