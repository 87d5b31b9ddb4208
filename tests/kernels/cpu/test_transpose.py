"""Transpose (kernel "transpose") against numpy: random shapes of rank 1 to 6 and permutations,
float32 and int32, one and two threads (whole vector tiles, their edges, row copies, flat copies),
and the simplification that picks the loop for the zoo's permutations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.kernels.cpu.transpose import Transpose, simplify
from edgecnn.ops.shape import TransposeAttrs
from kernels.support import fast_run, tuned


@st.composite
def transpose_case(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """A shape of rank 1-6 (a few sides past a tile or two) and a permutation of its axes."""
    rank = draw(st.integers(1, 6))
    most = (40, 40, 20, 10, 6, 4)[rank - 1]  # at most a few thousand elements
    shape = draw(st.lists(st.integers(1, most), min_size=rank, max_size=rank))
    return shape, draw(st.permutations(range(rank)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=transpose_case(), integer=st.booleans(), threads=st.sampled_from([1, 2]), seed=st.integers(0, 2**16)
)
def test_transpose_matches_numpy(
    case: tuple[list[int], list[int]], integer: bool, threads: int, seed: int
) -> None:
    shape, perm = case
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if integer:
        x = (x * 1000).astype(np.int32)
    with tuned(grain=0 if threads == 2 else 1 << 30):  # two threads: even these small ones split
        actual, kernel = fast_run("Transpose", TransposeAttrs(tuple(perm)), [x], (), threads)
    assert kernel == "transpose"
    np.testing.assert_array_equal(actual, np.transpose(x, perm))


@pytest.mark.parametrize(
    ("shape", "perm", "dims", "order", "kind"),
    [
        ((1, 96, 56, 56), (0, 2, 3, 1), (96, 3136), (1, 0), "tiles"),  # NCHW -> NHWC at batch 1
        ((8, 56, 56, 96), (0, 3, 1, 2), (8, 3136, 96), (0, 2, 1), "tiles"),  # NHWC -> NCHW at batch 8
        ((1, 2, 58, 28, 28), (0, 2, 1, 3, 4), (2, 58, 784), (1, 0, 2), "rows"),  # channel shuffle
        ((1, 4, 16, 8400), (0, 2, 1, 3), (4, 16, 8400), (1, 0, 2), "rows"),  # YOLOv8's box bins
        ((1, 5, 1, 7), (2, 1, 0, 3), (35,), (0,), "copy"),  # only size-1 axes move
        ((2, 3, 4, 5, 6, 7), (5, 3, 1, 0, 2, 4), (2, 3, 4, 5, 6, 7), (5, 3, 1, 0, 2, 4), "tiles"),
    ],
)
def test_simplified_permutations_pick_their_loop(
    shape: tuple[int, ...], perm: tuple[int, ...], dims: tuple[int, ...], order: tuple[int, ...], kind: str
) -> None:
    assert simplify(shape, perm) == (dims, order)
    kernel = Transpose(
        Node("Transpose", "t", ["x"], ["y"], TransposeAttrs(perm)), [TensorType("float32", shape)], [None]
    )
    assert kernel.kind == kind
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out = np.full(kernel.out_shape, np.nan, np.float32)
    with cpu_threads(2):
        kernel.run_into(out, x)
    np.testing.assert_array_equal(out, np.transpose(x, perm))


def test_other_element_sizes_stay_on_the_reference() -> None:
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    actual, kernel = fast_run("Transpose", TransposeAttrs((2, 0, 1)), [x], (), 1)
    assert kernel == "reference"
    np.testing.assert_array_equal(actual, np.transpose(x, (2, 0, 1)))
