"""Transpose (kernel "transpose") against the numpy reference: every permutation of random shapes
of rank 1 to 5 (size-1 axes included), float32 and int32, one and two threads; the axis collapsing;
a permutation that leaves five axes apart stays on the reference."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.kernels.cpu.transpose import collapse_permutation
from edgecnn.ops.shape import TransposeAttrs
from kernels.support import fast_run, tuned


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.lists(st.integers(1, 19), min_size=1, max_size=5),
    data=st.data(),
    integer=st.booleans(),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_transpose_matches_reference(
    shape: list[int], data: st.DataObject, integer: bool, threads: int, seed: int
) -> None:
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    if integer:
        x = (x * 1000).astype(np.int32)
    with tuned(grain=0 if threads == 2 else 1 << 30):
        actual, kernel = fast_run("Transpose", TransposeAttrs(perm), [x], (), threads)
    expected = x.transpose(perm)
    assert kernel == ("transpose" if collapse_permutation(tuple(shape), perm) else "reference")
    assert actual.dtype == x.dtype and np.array_equal(actual, expected)


def test_collapse_joins_axes_that_move_together() -> None:
    assert collapse_permutation((2, 3, 5, 7), (0, 2, 3, 1)) == ((1, 2, 35, 3), (0, 105, 1, 35))
    assert collapse_permutation((2, 1, 5), (1, 0, 2)) == ((1, 1, 1, 10), (0, 0, 0, 1))
    assert collapse_permutation((2, 3, 4, 5, 6), (4, 3, 2, 1, 0)) is None


def test_five_separate_axes_stay_on_the_reference() -> None:
    x = np.arange(720, dtype=np.float32).reshape(2, 3, 4, 5, 6)
    actual, kernel = fast_run("Transpose", TransposeAttrs((4, 3, 2, 1, 0)), [x], (), 1)
    assert kernel == "reference" and np.array_equal(actual, x.transpose(4, 3, 2, 1, 0))
