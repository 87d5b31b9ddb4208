"""Gemm and FusedGemm (kernel "gemm") against the numpy reference: transposes, alpha/beta, every
broadcastable C, every fused activation, tiles on 2 threads, and the np.matmul fallback."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.kernels.cpu.gemm import tiling
from edgecnn.kernels.cpu.system import blas
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import ACTIVATIONS, FusedGemmAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run, tuned


@st.composite
def gemm_cases(draw: st.DrawFn) -> dict[str, Any]:
    m, k, n = draw(st.integers(1, 5)), draw(st.integers(1, 40)), draw(st.integers(1, 40))
    trans_a, trans_b = draw(st.booleans()), draw(st.booleans())
    c_shape = draw(st.sampled_from([None, (n,), (1, n), (m, n), (m, 1), (), (1,)]))
    activation = draw(st.sampled_from(ACTIVATIONS))
    gemm = {
        "alpha": draw(st.sampled_from([1.0, 0.5, -2.0])),
        "beta": draw(st.sampled_from([1.0, 0.0, 3.0])),
        "trans_a": trans_a,
        "trans_b": trans_b,
    }
    if activation == "none":
        op, attrs = "Gemm", GemmAttrs(**gemm)
    else:
        low = draw(st.floats(-2.0, 0.5))
        slope = draw(st.floats(0.0, 0.5))
        op, attrs = (
            "FusedGemm",
            FusedGemmAttrs(activation=activation, negative_slope=slope, low=low, high=low + 1.5, **gemm),
        )
    return {
        "op": op,
        "attrs": attrs,
        "a_shape": (k, m) if trans_a else (m, k),
        "b_shape": (n, k) if trans_b else (k, n),
        "c_shape": c_shape,
        "seed": draw(st.integers(0, 2**16)),
    }


def check_gemm(case: dict[str, Any], threads: int) -> None:
    rng = np.random.default_rng(case["seed"])
    a = rng.standard_normal(case["a_shape"], dtype=np.float32)
    b = rng.standard_normal(case["b_shape"], dtype=np.float32)
    inputs = [a, b]
    if case["c_shape"] is not None:
        inputs.append(rng.standard_normal(case["c_shape"], dtype=np.float32))
    constants = tuple(range(1, len(inputs)))
    actual, kernel = fast_run(case["op"], case["attrs"], inputs, constants, threads)
    assert kernel == "gemm"
    attrs = case["attrs"]
    magnitude = abs(attrs.alpha) * np.abs(a).max() * np.abs(b).max() * a.size + 3.0 * (len(inputs) == 3)
    assert_matches(actual, reference_run(case["op"], attrs, inputs, constants), magnitude)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gemm_cases(), st.sampled_from([1, 2]))
def test_gemm_matches_reference(case: dict[str, Any], threads: int) -> None:
    check_gemm(case, threads)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gemm_cases())
def test_gemm_tiles_on_two_threads(case: dict[str, Any]) -> None:
    with (
        tuned(gemm_grain=0),
        mock.patch.object(tiling, "MIN_COLUMNS", 2),
        mock.patch.object(tiling, "MIN_ROWS", 1),
    ):
        check_gemm(case, 2)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gemm_cases())
def test_matmul_fallback_matches_reference(case: dict[str, Any]) -> None:
    with mock.patch.object(blas, "AVAILABLE", False):
        check_gemm(case, 2)


def test_fully_connected_layer_of_alexnet_size() -> None:
    """A GEMV (batch 1) wide enough to be split across threads, with bias and ReLU fused."""
    case = {
        "op": "FusedGemm",
        "attrs": FusedGemmAttrs(activation="relu", trans_b=True),
        "a_shape": (1, 1200),
        "b_shape": (700, 1200),
        "c_shape": (700,),
        "seed": 1,
    }
    for threads in (1, 2):
        check_gemm(case, threads)


def test_runtime_weights_use_the_reference() -> None:
    a = np.ones((2, 3), np.float32)
    _, kernel = fast_run("Gemm", GemmAttrs(), [a, np.ones((3, 4), np.float32)], (), 1)
    assert kernel == "reference"
