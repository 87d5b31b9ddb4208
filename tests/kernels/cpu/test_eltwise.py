"""Stand-alone activations (kernel "activation") against the numpy reference, NaN included, and the
size below which the reference keeps running."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu import cpu_threads, eltwise
from edgecnn.ops.activation import LeakyReluAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run, tuned

CASES: list[tuple[str, Any, int]] = [
    ("Relu", NoAttrs(), 1),
    ("LeakyRelu", LeakyReluAttrs(0.1), 1),
    ("Sigmoid", NoAttrs(), 1),
    ("HardSwish", NoAttrs(), 1),
    ("Clip", NoAttrs(), 3),  # low and high given
    ("Clip", NoAttrs(), 2),  # low only
]


def inputs_for(op: str, count: int, x: np.ndarray) -> list[np.ndarray | None]:
    bounds = [np.array(-0.5, np.float32), np.array(1.5, np.float32)]
    return [x, *bounds[: count - 1]]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(CASES),
    shape=st.lists(st.integers(1, 19), min_size=1, max_size=4),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_activations_match_reference(
    case: tuple[str, Any, int], shape: list[int], threads: int, seed: int
) -> None:
    op, attrs, count = case
    x = (np.random.default_rng(seed).standard_normal(shape) * 8).astype(np.float32)
    x.reshape(-1)[::7] = np.nan
    inputs = inputs_for(op, count, x)
    constants = tuple(range(1, count))
    with (
        tuned(eltwise_min_size=1),
        mock.patch.object(eltwise, "CHUNK", 5),
        tuned(memory_bound_grain=0 if threads == 2 else 1 << 30),
        tuned(grain=0 if threads == 2 else 1 << 30),
    ):
        actual, kernel = fast_run(op, attrs, inputs, constants, threads)
    assert kernel == "activation"
    assert_matches(actual, reference_run(op, attrs, inputs, constants), 8.0)


@pytest.mark.parametrize(("op", "attrs", "count"), CASES)
def test_large_tensor(op: str, attrs: Any, count: int) -> None:
    x = np.random.default_rng(0).standard_normal((2, 32, 57, 61)).astype(np.float32)
    inputs = inputs_for(op, count, x)
    actual, kernel = fast_run(op, attrs, inputs, tuple(range(1, count)), 2)
    assert kernel == "activation"
    assert_matches(actual, reference_run(op, attrs, inputs, tuple(range(1, count))))


def test_small_tensors_and_runtime_bounds_stay_on_the_reference() -> None:
    small = np.ones((4, 4), np.float32)
    assert fast_run("Relu", NoAttrs(), [small], (), 1)[1] == "reference"
    big = np.ones((64, 128), np.float32)
    bound = np.array(0.5, np.float32)
    assert fast_run("Clip", NoAttrs(), [big, bound], (), 1)[1] == "reference"  # bound is an input


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(CASES),
    size=st.integers(1, 40),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_in_place_matches_reference(case: tuple[str, Any, int], size: int, threads: int, seed: int) -> None:
    """out = x, as plans run it when x is not read again: its own loop (activate_in_place)."""
    op, attrs, count = case
    x = (np.random.default_rng(seed).standard_normal((3, size)) * 8).astype(np.float32)
    x.reshape(-1)[::5] = np.nan
    inputs = inputs_for(op, count, x)
    constants = tuple(range(1, count))
    expected = reference_run(op, attrs, inputs, constants)
    node = Node(op, "node", ["x", *(f"c{i}" for i in constants)], ["out"], attrs)
    types = [TensorType("float32", x.shape), *(TensorType("float32", ()) for _ in constants)]
    with (
        tuned(eltwise_min_size=1),
        mock.patch.object(eltwise, "CHUNK", 7),
        tuned(grain=0 if threads == 2 else 1 << 30, memory_bound_grain=0 if threads == 2 else 1 << 30),
        cpu_threads(threads),
    ):
        kernel = eltwise.Activation(node, types, inputs)
        kernel.run_into(x, x)
    assert_matches(x, expected, 8.0)
