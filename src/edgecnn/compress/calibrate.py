"""Activation ranges for int8 quantisation, observed on sample inputs (post-training calibration).

Three ways to turn what a tensor took on into the range its int8 grid covers:

- ``minmax``: the smallest and largest value seen; nothing clips, outliers cost resolution;
- ``percentile``: the range holding ``percentile`` % of the |values| (default 99.99);
- ``kl``: the clipping threshold whose 8-bit histogram stays closest, in Kullback-Leibler
  divergence, to the observed one (the entropy calibration TensorRT popularised).

Every tensor is observed through ``Model.run(feeds, outputs=[...])`` on the graph as it will run
(passes applied), so the ranges belong to the tensors the int8 rewrite sees.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgecnn.errors import InputError
from edgecnn.ir.graph import Graph, TensorSpec
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.vision.preprocess import Preprocess, load_array

METHODS = ("minmax", "percentile", "kl")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".pgm", ".ppm", ".gif", ".tif", ".tiff", ".webp")
HISTOGRAM_BINS = 2048


@dataclass(frozen=True)
class Range:
    """The real interval a tensor's quantisation grid should cover."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if not (np.isfinite(self.low) and np.isfinite(self.high)) or self.low > self.high:
            raise ValueError(f"invalid range [{self.low}, {self.high}]")


def calibration_inputs(
    directory: str | os.PathLike[str],
    spec: TensorSpec,
    limit: int | None = None,
    preprocess: Preprocess | None = None,
) -> list[np.ndarray]:
    """The sample inputs in ``directory`` (sorted by name): .npy arrays as saved (a missing batch
    axis is added); images through ``preprocess``, by default resized to the input's height and
    width, RGB (grey for one channel) scaled to 0..1 -- give the model's own preprocessing."""

    folder = Path(directory)
    if not folder.is_dir():
        raise InputError(f"calibration directory not found: {folder}")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".npy", *IMAGE_SUFFIXES))
    if not files:
        raise InputError(f"{folder}: no .npy arrays or images to calibrate with")
    shape = spec.shape
    rank = len(shape) if shape is not None else None
    samples = []
    for path in files[:limit]:
        if path.suffix.lower() == ".npy":
            array = np.asarray(load_array(path), dtype=np.float32)
            if rank is not None and array.ndim == rank - 1:
                array = array[None]
        else:
            if shape is None or len(shape) != 4 or not all(isinstance(d, int) for d in shape[1:]):
                raise InputError(
                    f"input '{spec.name}' {shape} is not [N, C, H, W] with known C, H, W: "
                    "calibrate with .npy arrays instead of images"
                )
            if preprocess is None:
                height, width = shape[2], shape[3]
                assert isinstance(height, int) and isinstance(width, int)  # checked above
                size = (height, width)
                preprocess = Preprocess(size=size, grayscale=shape[1] == 1, scale=1 / 255)
            array = preprocess.image(path)
        if rank is not None and array.ndim != rank:
            raise InputError(f"{path}: shape {list(array.shape)} does not fit input '{spec.name}' {shape}")
        samples.append(np.ascontiguousarray(array, dtype=np.float32))
    return samples


class Histogram:
    """|x| counts over [0, limit) in fixed bins, plus the signed extremes."""

    def __init__(self, limit: float, bins: int = HISTOGRAM_BINS) -> None:
        self.limit = max(float(limit), float(np.finfo(np.float32).tiny))
        self.counts = np.zeros(bins, dtype=np.int64)

    def add(self, values: np.ndarray) -> None:
        magnitudes = np.abs(values.reshape(-1)).astype(np.float64)
        counts, _ = np.histogram(magnitudes, bins=self.counts.size, range=(0.0, self.limit))
        self.counts += counts

    @property
    def width(self) -> float:
        return self.limit / self.counts.size

    def percentile(self, percent: float) -> float:
        """The |x| below which ``percent`` % of the values lie (upper edge of that bin)."""
        cumulative = np.cumsum(self.counts)
        if cumulative[-1] == 0:
            return 0.0
        index = int(np.searchsorted(cumulative, cumulative[-1] * percent / 100.0))
        return min(index + 1, self.counts.size) * self.width

    def kl_threshold(self, levels: int) -> float:
        """The threshold minimising KL(P || Q), P the clipped histogram, Q it quantised to ``levels``."""
        counts = self.counts.astype(np.float64)
        if counts.sum() == 0:
            return 0.0
        best, best_divergence = counts.size, np.inf
        for edge in range(levels, counts.size + 1):
            reference = counts[:edge].copy()
            reference[-1] += counts[edge:].sum()  # clipped values land in the last bin
            divergence = _kl(reference, _quantized(counts[:edge], levels))
            if divergence < best_divergence:
                best, best_divergence = edge, divergence
        return best * self.width


def _quantized(counts: np.ndarray, levels: int) -> np.ndarray:
    """``counts`` merged into ``levels`` groups, each spread back evenly over its non-empty bins."""
    groups = np.minimum((np.arange(counts.size) * levels) // counts.size, levels - 1)
    totals = np.bincount(groups, weights=counts, minlength=levels)
    occupied = np.bincount(groups, weights=(counts > 0).astype(np.float64), minlength=levels)
    spread = np.divide(totals, occupied, out=np.zeros(levels), where=occupied > 0)
    return np.where(counts > 0, spread[groups], 0.0)


def _kl(p: np.ndarray, q: np.ndarray, epsilon: float = 1e-4) -> float:
    """KL(p || q) of two histograms; q's empty bins get ``epsilon`` of mass (taken evenly from its
    others), so the mass clipping piles into p's last bin costs a finite, growing divergence."""
    q_total = q.sum()
    if q_total == 0:
        return np.inf
    p = p / p.sum()
    q = q / q_total
    empty = q == 0
    if empty.any():
        q = np.where(empty, epsilon, q - epsilon * empty.sum() / max(int((~empty).sum()), 1))
        if np.any(q <= 0):
            return np.inf
    support = p > 0
    return float(np.sum(p[support] * np.log(p[support] / q[support])))


def observe(
    graph: Graph,
    tensors: Sequence[str],
    samples: Iterable[Mapping[str, np.ndarray] | np.ndarray],
    *,
    method: str = "minmax",
    percentile: float = 99.99,
    threads: int | None = None,
) -> dict[str, Range]:
    """Range of each of ``tensors`` over ``samples``, by ``method`` (minmax, percentile or kl).

    ``graph`` runs as given (no passes), so name the tensors of the graph being quantised."""
    if method not in METHODS:
        raise InputError(f"unknown calibration method '{method}': use {', '.join(METHODS)}")
    if not 0.0 < percentile <= 100.0:
        raise InputError(f"percentile must be in (0, 100], got {percentile}")
    feeds = list(samples)
    if not feeds:
        raise InputError("calibration needs at least one sample input")
    model = Model(graph, RuntimeOptions.resolve(threads, optimize=False))
    names = list(dict.fromkeys(tensors))
    low = dict.fromkeys(names, np.inf)
    high = dict.fromkeys(names, -np.inf)
    for feed in feeds:
        for name, value in model.run(feed, outputs=names).items():
            if value.size:
                low[name] = min(low[name], float(np.min(value)))
                high[name] = max(high[name], float(np.max(value)))
    for name in names:
        if not np.isfinite(low[name]) or not np.isfinite(high[name]):
            raise InputError(f"tensor '{name}' took no finite values on the calibration inputs")
    if method == "minmax":
        return {name: Range(low[name], high[name]) for name in names}
    histograms = {name: Histogram(max(abs(low[name]), abs(high[name]))) for name in names}
    for feed in feeds:
        for name, value in model.run(feed, outputs=names).items():
            histograms[name].add(value)
    ranges = {}
    for name in names:
        histogram = histograms[name]
        nonnegative = low[name] >= 0.0
        if method == "percentile":
            threshold = histogram.percentile(percentile)
        else:
            threshold = histogram.kl_threshold(256 if nonnegative else 128)
        ranges[name] = Range(max(low[name], -threshold), min(high[name], threshold))
    return ranges
