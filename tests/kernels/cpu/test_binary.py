"""Add/Sub/Mul/Div (kernel "binary") against the numpy reference: random shapes broadcast against
each other (dimensions dropped or set to 1 on either side), constants, division by zero, one and two
threads; the loop collapsing; four axes that cannot merge stay on the reference."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.kernels.cpu.binary import OPS, binary_rows_serial, collapse
from edgecnn.kernels.cpu.gemm.microkernel import LANES
from edgecnn.ops.registry import NoAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run, tuned


@st.composite
def broadcast_pair(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes that broadcast: one drawn, the other with leading axes dropped and some set to 1."""
    shape = tuple(draw(st.lists(st.integers(1, 11), min_size=0, max_size=4)))
    keep = draw(st.integers(0, len(shape)))
    other = list(shape[len(shape) - keep :])
    for i in range(len(other)):
        if draw(st.booleans()):
            other[i] = 1
    pair = (shape, tuple(other))
    return pair if draw(st.booleans()) else (pair[1], pair[0])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=broadcast_pair(),
    op=st.sampled_from(["Add", "Sub", "Mul", "Div"]),
    constant=st.sampled_from([(), (0,), (1,)]),
    zeros=st.booleans(),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_binary_matches_reference(
    shapes: tuple[tuple[int, ...], tuple[int, ...]],
    op: str,
    constant: tuple[int, ...],
    zeros: bool,
    threads: int,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    if zeros and b.size > 1:
        b.reshape(-1)[rng.integers(0, b.size, 2)] = 0.0  # x / 0: inf, and NaN for 0 / 0
        a.reshape(-1)[0] = 0.0
    if len(constant) == 1 and len(shapes[1 - constant[0]]) == 0:
        constant = ()  # a graph needs one runtime input
    with tuned(grain=0 if threads == 2 else 1 << 30), np.errstate(divide="ignore", invalid="ignore"):
        actual, kernel = fast_run(op, NoAttrs(), [a, b], constant, threads)
        expected = reference_run(op, NoAttrs(), [a, b], constant)
    out = tuple(np.broadcast_shapes(shapes[0], shapes[1]))
    assert kernel == (
        "binary" if collapse(out, shapes[0], shapes[1]) else "reference"
    )  # four loops: declined
    assert_matches(actual, expected)
    finite = np.isfinite(expected)
    assert np.array_equal(actual[finite], expected[finite])  # IEEE float32, as numpy


def test_squeeze_excite_gate_and_odd_sizes() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 37, 13, 11)).astype(np.float32)
    gate = rng.random((3, 37, 1, 1)).astype(np.float32)
    actual, kernel = fast_run("Mul", NoAttrs(), [x, gate], (), 2)
    assert kernel == "binary"
    assert np.array_equal(actual, x * gate)


def test_rows_around_the_vector_width_in_place_and_not() -> None:
    """Rows of whole vectors, of a masked tail only, and of both (the gate of a 7x7 map: 49), each
    op with the broadcast value on either side and with two full inputs, into a fresh array and
    in place; nothing is written past the output's end."""
    rng = np.random.default_rng(5)
    numpy_ops = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}
    for inner in (1, LANES - 1, LANES, LANES + 1, 2 * LANES + 3, 49):
        full = rng.standard_normal((2, 3, inner)).astype(np.float32)
        other = (rng.random((2, 3, inner)) + 0.5).astype(np.float32)
        scale = (rng.random((2, 3, 1)) + 0.5).astype(np.float32)
        for name, op in OPS.items():
            for a, b in ((full, scale), (scale, full), (full, other)):
                layout = collapse(full.shape, a.shape, b.shape)
                assert layout is not None
                sizes, sa, sb = layout
                expected = numpy_ops[name](a, b).reshape(-1)
                guarded = np.full(full.size + LANES, 7.0, np.float32)
                binary_rows_serial(op, a.reshape(-1), sa, b.reshape(-1), sb, guarded[: full.size], sizes)
                assert np.array_equal(guarded[: full.size], expected), (inner, name)
                assert np.all(guarded[full.size :] == 7.0)
                target = (a if a.shape == full.shape else b).copy().reshape(-1)
                x = target if a.shape == full.shape else a.reshape(-1)
                y = b.reshape(-1) if a.shape == full.shape else target
                binary_rows_serial(op, x, sa, y, sb, target, sizes)
                assert np.array_equal(target, expected), (inner, name, "in place")


def test_collapse_merges_what_steps_as_one() -> None:
    assert collapse((2, 5, 7, 3), (2, 5, 7, 3), (2, 5, 1, 1)) == ((1, 10, 21), (0, 21, 1), (0, 1, 0))
    assert collapse((4, 6), (4, 6), ()) == ((1, 1, 24), (0, 0, 1), (0, 0, 0))
    assert collapse((2, 3, 4, 5), (2, 1, 4, 1), (1, 3, 1, 5)) is None


def test_unmergeable_broadcast_runs_on_the_reference() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 1, 4, 1)).astype(np.float32)
    b = rng.standard_normal((1, 3, 1, 5)).astype(np.float32)
    actual, kernel = fast_run("Add", NoAttrs(), [a, b], (), 1)
    assert kernel == "reference"
    np.testing.assert_array_equal(actual, a + b)
