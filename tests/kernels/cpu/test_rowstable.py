"""The shared_filters and shared_features kernels (kernels/cpu/rowstable.py): repeated weight rows
are found exactly, and output channels (Conv) or features (Gemm) that share a weight row and a
bias are bit-identical, whatever their positions, while the whole output still matches the numpy
reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgecnn.kernels.cpu.rowstable  # noqa: F401  (registers shared_filters)
from edgecnn.kernels.cpu.rowstable import SAMPLED_COLUMNS, _sampled_columns, repeated_rows
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import FusedConvAttrs, FusedGemmAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 40),
    width=st.integers(1, 70),
    pool=st.integers(1, 6),
    seed=st.integers(0, 2**31 - 1),
)
def test_repeated_rows_reconstructs_the_matrix(rows: int, width: int, pool: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    distinct = rng.standard_normal((pool, width)).astype(np.float32)
    matrix = distinct[rng.integers(0, pool, rows)]
    sharing = repeated_rows(matrix)
    unique_count = len({row.tobytes() for row in matrix})
    if unique_count == rows:
        assert sharing is None
        return
    assert sharing is not None
    assert np.array_equal(matrix[sharing.first][sharing.inverse].view(np.uint32), matrix.view(np.uint32))
    assert len(sharing.first) == unique_count
    assert np.all(np.diff(sharing.first) > 0)  # first appearances, in order
    assert np.all(sharing.first[sharing.inverse] <= np.arange(rows))


def test_rows_equal_in_the_sampled_columns_only_stay_apart() -> None:
    width = 10 * SAMPLED_COLUMNS
    unsampled = sorted(set(range(width)) - set(_sampled_columns(width).tolist()))
    assert unsampled
    matrix = np.ones((4, width), np.float32)
    matrix[1, unsampled[0]] = 2.0  # rows 0-3 have the same key; only the full comparison tells them apart
    matrix[3, unsampled[0]] = 2.0
    sharing = repeated_rows(matrix)
    assert sharing is not None
    assert sharing.first.tolist() == [0, 1]
    assert sharing.inverse.tolist() == [0, 1, 0, 1]


@pytest.mark.parametrize("width", [1, 15, 16, 17, 40, 4609])
def test_sampled_columns_are_in_range_and_cover_both_ends(width: int) -> None:
    columns = _sampled_columns(width)
    assert columns.tolist() == sorted(set(columns.tolist()))
    assert columns[0] == 0 and columns[-1] == width - 1
    assert len(columns) == min(width, SAMPLED_COLUMNS)


def test_signed_zeros_and_nans_compare_bitwise() -> None:
    assert repeated_rows(np.array([[0.0], [-0.0]], np.float32)) is None
    sharing = repeated_rows(np.array([[np.nan, 1.0], [np.nan, 1.0]], np.float32))
    assert sharing is not None and sharing.inverse.tolist() == [0, 0]


def test_repeated_rows_rejects_other_ranks() -> None:
    with pytest.raises(ValueError, match="2-D"):
        repeated_rows(np.zeros((2, 2, 2), np.float32))


@st.composite
def shared_filter_cases(draw: st.DrawFn) -> dict[str, Any]:
    kernel = draw(st.sampled_from([(1, 1), (3, 3), (1, 3)]))
    pool = draw(st.integers(1, 5))
    channels = draw(st.integers(pool + 1, 40))
    return {
        "seed": draw(st.integers(0, 2**31 - 1)),
        "batch": draw(st.integers(1, 2)),
        "in_channels": draw(st.integers(1, 24)),
        "size": (draw(st.integers(1, 17)), draw(st.integers(1, 17))),
        "kernel": kernel,
        "pads": (0, 0, 0, 0) if kernel == (1, 1) else (1, 1, 1, 1) if kernel == (3, 3) else (0, 1, 0, 1),
        "pool": pool,
        "channels": channels,
        "bias": draw(st.booleans()),
        "activation": draw(st.sampled_from(["none", "relu", "leaky_relu", "clip"])),
        "threads": draw(st.integers(1, 2)),
        "scale": draw(st.sampled_from([1.0, 1e8])),
    }


def run_case(case: dict[str, Any]) -> None:
    rng = np.random.default_rng(case["seed"])
    c, (h, w) = case["in_channels"], case["size"]
    x = (rng.random((case["batch"], c, h, w)) * case["scale"]).astype(np.float32)
    filters = rng.standard_normal((case["pool"], c, *case["kernel"])).astype(np.float32)
    biases = rng.standard_normal(case["pool"]).astype(np.float32)
    which = np.concatenate(
        [np.arange(case["pool"]), rng.integers(0, case["pool"], case["channels"] - case["pool"])]
    )
    rng.shuffle(which)
    weights = np.ascontiguousarray(filters[which])
    inputs = [x, weights, np.ascontiguousarray(biases[which]) if case["bias"] else None]
    attrs = FusedConvAttrs(pads=case["pads"], activation=case["activation"], low=-0.5, high=0.5)
    out, kernel = fast_run("FusedConv", attrs, inputs, (1, 2), case["threads"])
    assert kernel == "shared_filters"
    for m in range(case["channels"]):  # a channel equals the first channel with its filter, bit for bit
        first = int(np.flatnonzero(which == which[m])[0])
        assert np.array_equal(out[:, m].view(np.uint32), out[:, first].view(np.uint32)), (m, first)
    expected = reference_run("FusedConv", attrs, inputs, (1, 2))
    magnitude = case["scale"] * np.abs(filters).sum(axis=(1, 2, 3)).max()
    assert_matches(out, expected, magnitude)


@SETTINGS
@given(shared_filter_cases())
def test_shared_filters_give_identical_channels_and_match_the_reference(case: dict[str, Any]) -> None:
    run_case(case)


def test_constant_filters_at_large_magnitude() -> None:
    """The light SqueezeNet's situation: one constant filter everywhere, activations ~1e10, 1000
    output channels (where OpenBLAS's sgemm rounds rows 6-11 of each 12 differently)."""
    rng = np.random.default_rng(5)
    x = (rng.random((1, 64, 13, 13)) * 1e9).astype(np.float32)
    w = np.full((1000, 64, 1, 1), 0.02, np.float32)
    b = np.full(1000, 0.02, np.float32)
    for threads in (1, 2):
        out, kernel = fast_run("Conv", ConvAttrs(), [x, w, b], (1, 2), threads)
        assert kernel == "shared_filters"
        assert len({row.tobytes() for row in out.reshape(1000, -1)}) == 1
        assert_matches(out, reference_run("Conv", ConvAttrs(), [x, w, b], (1, 2)), 1e9 * 64 * 0.02)


def test_distinct_filters_keep_the_ordinary_kernels() -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 8, 9, 9)).astype(np.float32)
    w = rng.standard_normal((12, 8, 1, 1)).astype(np.float32)
    _, kernel = fast_run("Conv", ConvAttrs(), [x, w], (1,), 1)
    assert kernel == "pointwise"
    _, kernel = fast_run("Conv", ConvAttrs(group=2), [x, np.ones((12, 4, 1, 1), np.float32)], (1,), 1)
    assert kernel != "shared_filters"  # grouped convolutions are left alone


@st.composite
def shared_feature_cases(draw: st.DrawFn) -> dict[str, Any]:
    pool = draw(st.integers(1, 5))
    return {
        "seed": draw(st.integers(0, 2**31 - 1)),
        "batch": draw(st.integers(1, 9)),
        "depth": draw(st.integers(1, 70)),
        "pool": pool,
        "features": draw(st.integers(pool + 1, 60)),
        "trans_a": draw(st.booleans()),
        "trans_b": draw(st.booleans()),
        "alpha": draw(st.sampled_from([1.0, 0.5])),
        "beta": draw(st.sampled_from([1.0, 2.0])),
        "c": draw(st.sampled_from(["none", "row", "matrix"])),
        "activation": draw(st.sampled_from(["none", "relu", "sigmoid"])),
        "threads": draw(st.integers(1, 2)),
        "scale": draw(st.sampled_from([1.0, 1e8])),
    }


@SETTINGS
@given(shared_feature_cases())
def test_shared_features_give_identical_columns_and_match_the_reference(case: dict[str, Any]) -> None:
    rng = np.random.default_rng(case["seed"])
    batch, depth, n = case["batch"], case["depth"], case["features"]
    a = (rng.random((batch, depth)) * case["scale"]).astype(np.float32)
    a = np.ascontiguousarray(a.T) if case["trans_a"] else a
    rows = rng.standard_normal((case["pool"], depth)).astype(np.float32)
    which = np.concatenate([np.arange(case["pool"]), rng.integers(0, case["pool"], n - case["pool"])])
    rng.shuffle(which)
    b = np.ascontiguousarray(rows[which] if case["trans_b"] else rows[which].T)
    per_feature = rng.standard_normal(case["pool"]).astype(np.float32)[which]
    c = {
        "none": None,
        "row": per_feature,
        # varies down a column, equal across columns that share a weight row
        "matrix": (per_feature[None, :] + rng.standard_normal((batch, 1))).astype(np.float32),
    }[case["c"]]
    attrs = FusedGemmAttrs(
        alpha=case["alpha"],
        beta=case["beta"],
        trans_a=case["trans_a"],
        trans_b=case["trans_b"],
        activation=case["activation"],
    )
    inputs = [a, b, c]
    out, kernel = fast_run("FusedGemm", attrs, inputs, (1, 2), case["threads"])
    assert kernel == "shared_features"
    for m in range(n):
        first = int(np.flatnonzero(which == which[m])[0])
        assert np.array_equal(out[:, m].view(np.uint32), out[:, first].view(np.uint32)), (m, first)
    expected = reference_run("FusedGemm", attrs, inputs, (1, 2))
    assert_matches(out, expected, case["scale"] * np.abs(rows).sum(axis=1).max())


def test_constant_dense_weights_with_a_batch() -> None:
    """Batch > 1 goes through sgemm, which (unlike sgemv at batch 1) rounds columns by position."""
    rng = np.random.default_rng(7)
    a = (rng.random((64, 512)) * 1e9).astype(np.float32)
    b = np.full((1000, 512), 0.02, np.float32)
    for threads in (1, 2):
        out, kernel = fast_run("Gemm", GemmAttrs(trans_b=True), [a, b], (1,), threads)
        assert kernel == "shared_features"
        assert len({column.tobytes() for column in np.ascontiguousarray(out.T)}) == 1
        assert_matches(out, reference_run("Gemm", GemmAttrs(trans_b=True), [a, b], (1,)), 1e9 * 512 * 0.02)
    rng_b = rng.standard_normal((1000, 512)).astype(np.float32)
    _, kernel = fast_run("Gemm", GemmAttrs(trans_b=True), [a, rng_b], (1,), 1)
    assert kernel == "gemm"
