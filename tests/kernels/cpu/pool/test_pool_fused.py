"""FusedMaxPool/FusedAveragePool (a pool with its activation applied as each pooled plane is
written) on the CPU against their reference (pool, then the activation): every activation, random
geometries, NaN, on one and two threads."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgecnn.kernels.cpu.pool.steps  # noqa: F401  (registers the fused pools' kernel, whatever the lazy list says)
from edgecnn.ops.fused import FusedActivation
from edgecnn.ops.fused_pool import FusedAveragePoolAttrs, FusedMaxPoolAttrs
from edgecnn.ops.pool import MaxPoolAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.cpu.pool.test_pool import pool_cases
from kernels.support import fast_run, tuned

ACTIVATIONS = [
    FusedActivation("relu"),
    FusedActivation("leaky_relu", negative_slope=0.1),
    FusedActivation("clip", low=0.0, high=6.0),
    FusedActivation("clip", low=-0.5, high=math.inf),
    FusedActivation("sigmoid"),
    FusedActivation("hard_swish"),
    FusedActivation("silu"),
    FusedActivation("none"),
]


def fused(attrs: Any, activation: FusedActivation) -> tuple[str, Any]:
    """The fused op and attrs of a MaxPool/AveragePool attrs with ``activation``."""
    settings_ = {f.name: getattr(attrs, f.name) for f in fields(attrs)}
    settings_.update({f.name: getattr(activation, f.name) for f in fields(FusedActivation)})
    if isinstance(attrs, MaxPoolAttrs):
        return "FusedMaxPool", FusedMaxPoolAttrs(**settings_)
    return "FusedAveragePool", FusedAveragePoolAttrs(**settings_)


def check_fused(case: dict[str, Any], activation: FusedActivation) -> None:
    op, attrs = fused(case["attrs"], activation)
    x = 3 * np.random.default_rng(case["seed"]).standard_normal(case["shape"], dtype=np.float32)
    actual, kernel = fast_run(op, attrs, [x], (), case["threads"])
    assert kernel == "pool_2d"
    assert_matches(actual, reference_run(op, attrs, [x], ()), np.abs(x).max())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=pool_cases(), activation=st.sampled_from(ACTIVATIONS))
def test_fused_pool_matches_reference(case: dict[str, Any], activation: FusedActivation) -> None:
    check_fused(case, activation)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=pool_cases(), activation=st.sampled_from(ACTIVATIONS))
def test_fused_pool_on_two_threads(case: dict[str, Any], activation: FusedActivation) -> None:
    case["threads"] = 2
    with tuned(grain=0):
        check_fused(case, activation)


@pytest.mark.parametrize("activation", ACTIVATIONS[:5], ids=lambda a: a.activation)
def test_fused_max_pool_keeps_nan(activation: FusedActivation) -> None:
    """NaN inside a window stays NaN through every activation (ReLU included, as np.maximum)."""
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    op, attrs = fused(MaxPoolAttrs(kernel_shape=(3, 3), pads=(1, 1, 1, 1)), activation)
    actual, _ = fast_run(op, attrs, [x], (), 1)
    assert np.isnan(actual[0, 1, 2, 3]) and np.isnan(actual).sum() == 9
    assert_matches(actual, reference_run(op, attrs, [x], ()))


def test_fused_relu_differs_from_the_plain_pool() -> None:
    """The activation really is applied (a kernel ignoring it would pass a test on positive data)."""
    x = -np.abs(np.random.default_rng(1).standard_normal((1, 3, 8, 8))).astype(np.float32) - 0.1
    op, attrs = fused(MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2)), FusedActivation("relu"))
    actual, _ = fast_run(op, attrs, [x], (), 1)
    plain, _ = fast_run("MaxPool", MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2)), [x], (), 1)
    assert (plain < 0).all() and (actual == 0).all()
