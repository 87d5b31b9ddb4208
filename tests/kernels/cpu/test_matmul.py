"""MatMul by a constant matrix (kernel "matmul") against the numpy reference: A of rank 2 to 4 with
odd sizes, one and two threads; a MatMul of two runtime inputs stays on the reference."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ops.registry import NoAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run, tuned


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    leading=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    depth=st.integers(1, 70),
    columns=st.integers(1, 40),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_matmul_matches_reference(
    leading: list[int], depth: int, columns: int, threads: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((*leading, depth)).astype(np.float32)
    b = rng.standard_normal((depth, columns)).astype(np.float32)
    with tuned(gemm_grain=0 if threads == 2 else 1 << 40):
        actual, kernel = fast_run("MatMul", NoAttrs(), [a, b], (1,), threads)
    assert kernel == "matmul"
    magnitude = np.abs(a) @ np.abs(b)
    assert_matches(actual, reference_run("MatMul", NoAttrs(), [a, b], (1,)), magnitude)


def test_two_runtime_inputs_stay_on_the_reference() -> None:
    rng = np.random.default_rng(0)
    a, b = (
        rng.standard_normal((3, 4, 5)).astype(np.float32),
        rng.standard_normal((3, 5, 2)).astype(np.float32),
    )
    actual, kernel = fast_run("MatMul", NoAttrs(), [a, b], (), 1)
    assert kernel == "reference"
    np.testing.assert_allclose(actual, a @ b, rtol=1e-5, atol=1e-6)
