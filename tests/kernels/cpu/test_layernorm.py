"""LayerNormalization (kernel "layer_norm") against the numpy reference: random shapes and axes,
scale and bias of the normalized shape or broadcast to it, no bias, large offsets, one and two
threads; a node that also returns its Mean stays on the reference."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ops.norm import LayerNormalizationAttrs
from edgecnn.testing import assert_matches, reference_run, run_node
from kernels.support import fast_run, tuned


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.lists(st.integers(1, 13), min_size=1, max_size=4),
    axis_pick=st.integers(0, 3),
    negative=st.booleans(),
    scale_shape=st.sampled_from(["full", "last", "scalar"]),
    bias=st.booleans(),
    offset=st.sampled_from([0.0, 100.0]),
    epsilon=st.sampled_from([1e-5, 1e-6, 0.1]),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_layer_norm_matches_reference(
    shape: list[int],
    axis_pick: int,
    negative: bool,
    scale_shape: str,
    bias: bool,
    offset: float,
    epsilon: float,
    threads: int,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    axis = axis_pick % len(shape)
    normalized = tuple(shape[axis:])
    parameter = {"full": normalized, "last": normalized[-1:], "scalar": ()}[scale_shape]
    x = (rng.standard_normal(shape) + offset).astype(np.float32)
    inputs = [x, rng.standard_normal(parameter).astype(np.float32)]
    if bias:
        inputs.append(rng.standard_normal(parameter).astype(np.float32))
    attrs = LayerNormalizationAttrs(axis=axis - len(shape) if negative else axis, epsilon=epsilon)
    constants = tuple(range(1, len(inputs)))
    with tuned(grain=0 if threads == 2 else 1 << 30):
        actual, kernel = fast_run("LayerNormalization", attrs, inputs, constants, threads)
    assert kernel == "layer_norm"
    assert_matches(actual, reference_run("LayerNormalization", attrs, inputs, constants))


def test_layer_norm_rows_of_odd_length_and_extremes() -> None:
    """Rows longer than a vector with an odd tail (the reordered float64 sums), a constant row
    (zero variance: epsilon alone), a row with a NaN, one with an infinity and one with values of
    1e30 give the reference's values, NaN where it has NaN."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((6, 77)) * 3 + 1000).astype(np.float32)
    x[1] = 7.0
    x[2, 40] = np.nan
    x[3, 5] = np.inf
    x[4] *= np.float32(1e27)
    inputs = [x, rng.standard_normal(77).astype(np.float32), rng.standard_normal(77).astype(np.float32)]
    attrs = LayerNormalizationAttrs(axis=-1, epsilon=1e-6)
    with np.errstate(invalid="ignore", over="ignore"):
        actual, kernel = fast_run("LayerNormalization", attrs, inputs, (1, 2), 1)
        expected = reference_run("LayerNormalization", attrs, inputs, (1, 2))
    assert kernel == "layer_norm"
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    finite = ~np.isnan(expected)
    assert_matches(actual[finite], expected[finite])


def test_mean_output_stays_on_the_reference() -> None:
    x = np.random.default_rng(0).standard_normal((2, 5, 7)).astype(np.float32)
    scale = np.ones(7, np.float32)
    y, mean, _ = run_node(
        "LayerNormalization", LayerNormalizationAttrs(), [x, scale], num_outputs=3, constant_inputs=(1,)
    )
    np.testing.assert_allclose(mean.reshape(-1), x.mean(axis=-1).reshape(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-5)
