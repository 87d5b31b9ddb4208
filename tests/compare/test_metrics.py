"""The per-tensor verdict: absolute differences judged against the tensor's scale and the other
engine's noise, so near-zero values with large relative errors pass and real errors do not."""

from __future__ import annotations

import numpy as np
import pytest

from edgecnn.compare.metrics import Tolerance, align, cosine, diff
from edgecnn.compare.peer import nudged


def test_near_zero_map_with_large_relative_error_passes() -> None:
    """An almost-all-zero sigmoid map: 2e-9 against 1e-9 is a relative error of 1 element by element,
    not a failure; the reported relative error is floored at float32 resolution of the map's scale."""
    theirs = np.full((1, 1, 8, 8), 1e-9, np.float32)
    theirs[0, 0, 0, 0] = 0.9
    ours = theirs.copy()
    ours[0, 0, 1:, :] = 2e-9
    assert np.max(np.abs(ours - theirs) / theirs) >= 0.99
    result = diff(ours, theirs, noise=0.0, tolerance=Tolerance())
    assert result.status == "ok" and result.max_rel < 1e-2


def test_error_beyond_noise_and_scale_is_over() -> None:
    rng = np.random.default_rng(0)
    theirs = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    ours = theirs.copy()
    ours[1, 2, 3, 3] += 0.01
    assert diff(ours, theirs, noise=1e-6, tolerance=Tolerance()).status == "over"
    # the same difference is within ten times a noisier engine's own change
    assert diff(ours, theirs, noise=2e-3, tolerance=Tolerance()).status == "ok"


def test_nan_where_the_other_engine_has_a_number() -> None:
    theirs = np.ones(5, np.float32)
    ours = theirs.copy()
    ours[2] = np.nan
    assert diff(ours, theirs, noise=0.0, tolerance=Tolerance()).status == "nan"
    assert diff(theirs * np.inf, theirs * np.inf, noise=0.0, tolerance=Tolerance()).status == "ok"


def test_align_flattened_and_mismatched() -> None:
    ours = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    np.testing.assert_array_equal(align(ours, ours.reshape(1, -1)), ours)
    assert align(ours, np.zeros(5, np.float32)) is None


def test_cosine_of_zeros_and_opposites() -> None:
    assert cosine(np.zeros(3), np.zeros(3)) == 1.0
    assert cosine(np.zeros(3), np.ones(3)) == 0.0
    assert cosine(np.ones(3), -np.ones(3)) == pytest.approx(-1.0)


def test_nudge_moves_every_float_by_one_ulp() -> None:
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    moved = nudged({"x": x, "ids": np.arange(3)})
    steps = np.abs(moved["x"].astype(np.float64) - x) / np.spacing(np.abs(x))
    assert np.all((steps > 0.49) & (steps < 1.01))  # one ulp (half of one at a power of two)
    np.testing.assert_array_equal(moved["ids"], np.arange(3))
