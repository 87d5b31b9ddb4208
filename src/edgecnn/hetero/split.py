"""Seed 001, Algorithm 4.2: give each chosen device a share of every layer's output nodes.

r_i = perf_i / sum(perf): a device twice as fast gets twice the output channels (conv) or output nodes (FC),
so all devices finish a layer at about the same time. The seed multiplies r_i by the layer's output count;
that product is rarely an integer, so counts are rounded by largest remainder (floor every share, then hand
the leftover units to the largest fractional parts; ties go to the larger share, then to the earlier device),
which keeps the sum exactly N and every count within 1 of its exact share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from edgecnn.hetero.profiles import ProfileError


def split_ratios(perf: Mapping[str, float] | Sequence[float]) -> list[float]:
    """Algorithm 4.2 lines 1-4: each device's share r_i = perf_i / sum(perf), in the given order."""
    values = list(perf.values()) if isinstance(perf, Mapping) else list(perf)
    if not values:
        raise ProfileError("no device performances given: cannot split work among zero devices")
    for value in values:
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ProfileError(f"relative performance must be a finite number > 0, got {value!r}")
    total = float(sum(values))
    return [float(v) / total for v in values]


def split_counts(total: int, ratios: Sequence[float]) -> list[int]:
    """Split ``total`` units (output channels/nodes) by ``ratios`` with largest-remainder rounding."""
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise ProfileError(f"the number of output units must be an integer >= 0, got {total!r}")
    shares = split_ratios(list(ratios))
    exact = [total * r for r in shares]
    counts = [math.floor(x) for x in exact]
    leftover = total - sum(counts)
    order = sorted(range(len(shares)), key=lambda i: (-(exact[i] - counts[i]), -shares[i], i))
    for i in order[:leftover]:
        counts[i] += 1
    return counts


@dataclass(frozen=True)
class LayerSplit:
    """One layer's split: per-device unit counts and the contiguous [start, stop) ranges they cover."""

    layer: str
    total: int
    counts: dict[str, int]

    @property
    def ranges(self) -> dict[str, tuple[int, int]]:
        """Contiguous output ranges in device order (the partition points of the seed's figure 4.3)."""
        out: dict[str, tuple[int, int]] = {}
        start = 0
        for name, count in self.counts.items():
            out[name] = (start, start + count)
            start += count
        return out


def split_layers(perf: Mapping[str, float], layers: Mapping[str, int]) -> list[LayerSplit]:
    """Algorithm 4.2 applied to every layer: ``layers`` maps a layer name to its output channel/node count."""
    names = list(perf)
    ratios = split_ratios(perf)
    result = []
    for layer, total in layers.items():
        try:
            counts = split_counts(total, ratios)
        except ProfileError as exc:
            raise ProfileError(f"layer {layer!r}: {exc}") from exc
        result.append(LayerSplit(layer, total, dict(zip(names, counts, strict=True))))
    return result
