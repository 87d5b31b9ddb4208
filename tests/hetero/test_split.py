"""Algorithm 4.2: shares proportional to relative performance and exact integer splits."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgecnn.hetero import ProfileError, split_counts, split_layers, split_ratios

perfs = st.lists(st.floats(min_value=1e-3, max_value=1.0, allow_nan=False), min_size=1, max_size=6)


def test_ratios_match_formula() -> None:
    assert split_ratios([1.0, 0.5, 0.5]) == pytest.approx([0.5, 0.25, 0.25])
    assert split_ratios({"a": 1.0, "b": 1.0 / 3.0}) == pytest.approx([0.75, 0.25])


def test_largest_remainder_example() -> None:
    # Exact shares 10 * (0.5, 0.3, 0.2) are integers; 11 units leave one remainder unit for the largest fraction.
    assert split_counts(10, [0.5, 0.3, 0.2]) == [5, 3, 2]
    assert split_counts(11, [0.5, 0.3, 0.2]) == [6, 3, 2]
    # Equal shares: the leftover goes to the earlier device.
    assert split_counts(4, [1.0, 1.0, 1.0]) == [2, 1, 1]
    assert split_counts(0, [1.0, 2.0]) == [0, 0]


def test_fewer_units_than_devices() -> None:
    assert split_counts(1, [0.2, 1.0, 0.5]) == [0, 1, 0]


def test_seed_layers_split_between_the_two_gpus() -> None:
    # Seed 001 table 4.2 output counts; gpu1 runs at ~0.42 of gpu0 in the worked example.
    layers = {"conv1": 16, "conv7": 1024, "fc10": 256, "fc12": 1470}
    splits = split_layers({"gpu0": 1.0, "gpu1": 0.4222}, layers)
    assert [s.layer for s in splits] == list(layers)
    for s in splits:
        assert sum(s.counts.values()) == s.total
        assert s.counts["gpu0"] > s.counts["gpu1"]
        assert s.ranges["gpu0"] == (0, s.counts["gpu0"])
        assert s.ranges["gpu1"] == (s.counts["gpu0"], s.total)
    assert splits[0].counts == {"gpu0": 11, "gpu1": 5}


@pytest.mark.parametrize("bad", [[], [0.0], [-1.0, 1.0], [math.nan], [math.inf]])
def test_bad_performances(bad: list[float]) -> None:
    with pytest.raises(ProfileError):
        split_ratios(bad)


@pytest.mark.parametrize("total", [-1, 2.5, True])
def test_bad_totals(total: object) -> None:
    with pytest.raises(ProfileError):
        split_counts(total, [1.0])  # type: ignore[arg-type]


def test_bad_layer_named_in_error() -> None:
    with pytest.raises(ProfileError, match="conv3"):
        split_layers({"a": 1.0}, {"conv3": -4})


@given(perfs, st.integers(min_value=0, max_value=5000))
def test_split_sums_and_is_proportional(perf: list[float], total: int) -> None:
    counts = split_counts(total, split_ratios(perf))
    assert sum(counts) == total
    assert all(c >= 0 for c in counts)
    ratios = split_ratios(perf)
    for count, ratio in zip(counts, ratios, strict=True):
        assert abs(count - total * ratio) < 1.0 + 1e-9
    # Monotone: a strictly faster device never gets fewer units.
    for i in range(len(perf)):
        for j in range(len(perf)):
            if perf[i] > perf[j] and ratios[i] > ratios[j]:
                assert counts[i] >= counts[j]


@given(perfs)
def test_ratios_sum_to_one(perf: list[float]) -> None:
    ratios = split_ratios(perf)
    assert sum(ratios) == pytest.approx(1.0)
    assert all(r > 0 for r in ratios)
