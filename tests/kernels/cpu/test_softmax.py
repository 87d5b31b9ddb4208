"""Softmax (kernel "softmax") against the numpy reference: ranks 1 to 4, every axis, the pre-opset-13
flattening (coerce_2d), large and tiny values, NaN and infinities, one and two threads."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ops.activation import SoftmaxAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run, tuned


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    axis_pick=st.integers(0, 3),
    negative=st.booleans(),
    coerce_2d=st.booleans(),
    scale=st.sampled_from([1.0, 30.0, 1e-3]),
    specials=st.booleans(),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_softmax_matches_reference(
    shape: list[int],
    axis_pick: int,
    negative: bool,
    coerce_2d: bool,
    scale: float,
    specials: bool,
    threads: int,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    if specials and x.size > 2:
        flat = x.reshape(-1)
        flat[rng.integers(0, x.size, 3)] = [np.nan, np.inf, -np.inf]
    axis = axis_pick % len(shape) - (len(shape) if negative else 0)
    attrs = SoftmaxAttrs(axis=axis, coerce_2d=coerce_2d)
    with tuned(grain=0 if threads == 2 else 1 << 30):
        actual, kernel = fast_run("Softmax", attrs, [x], (), threads)
    assert kernel == "softmax"
    with np.errstate(invalid="ignore"):
        expected = reference_run("Softmax", attrs, [x], ())
    assert_matches(actual, expected)


def test_classifier_head_rows_sum_to_one() -> None:
    x = np.random.default_rng(1).standard_normal((256, 10)).astype(np.float32) * 5
    actual, _ = fast_run("Softmax", SoftmaxAttrs(axis=-1), [x], (), 2)
    np.testing.assert_allclose(actual.sum(axis=1), 1.0, rtol=1e-6)
    assert_matches(actual, reference_run("Softmax", SoftmaxAttrs(axis=-1), [x], ()))
