"""Before/after measurements of a compressed .ecnn file against the same model stored raw: file size,
load time, latency, how far the outputs moved on seeded random inputs, and (given a scorer such as
edgecnn.train.evaluate.accuracy_score) the accuracy of both on a labelled set."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgecnn.compress.layers import density, weight_layers
from edgecnn.compress.sensitivity import top1
from edgecnn.format import load_ecnn, stored_nbytes
from edgecnn.ir.graph import Graph
from edgecnn.model import Model
from edgecnn.runtime.feeds import random_feeds
from edgecnn.runtime.options import RuntimeOptions


@dataclass(frozen=True)
class FileMeasurement:
    file_bytes: int
    load_ms: float  # median of load_ecnn (file -> Graph), page cache warm
    latency_ms: float  # median of Model.profile iterations


@dataclass(frozen=True)
class Comparison:
    before: FileMeasurement
    after: FileMeasurement
    max_abs_diff: float  # over every output, on the first random input (standard normal, seeded)
    top1_agreement: float  # fraction of random inputs whose first output's arg-max matches
    samples: int
    iterations: int
    accuracy: tuple[float, float] | None = None  # (before, after) by the ``score`` given to compare


@dataclass(frozen=True)
class TensorRow:
    layer: str
    tensor: str
    shape: tuple[int, ...]
    density: float
    storage: str
    raw_bytes: int
    stored_bytes: int


def seeded_feeds(
    model: Model, seed: int, count: int, shapes: Mapping[str, Sequence[int]] | None = None
) -> list[dict[str, np.ndarray]]:
    """``count`` standard-normal inputs (runtime.feeds.random_feeds with seeds seed, seed + 1, ...)."""
    return [random_feeds(model.inputs, shapes=shapes, seed=seed + i) for i in range(count)]


def median_ms(action: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def measure(
    path: Path, feeds: dict[str, np.ndarray], options: RuntimeOptions, iterations: int
) -> tuple[FileMeasurement, Model]:
    load_ms = median_ms(lambda: load_ecnn(path), repeats=3)
    model = Model(load_ecnn(path), options)
    profile = model.profile(feeds, iterations=iterations, warmup=3)
    return FileMeasurement(os.path.getsize(path), load_ms, profile.median_ms), model


def compare(
    raw_path: Path,
    compressed_path: Path,
    *,
    seed: int = 0,
    samples: int = 8,
    iterations: int = 10,
    threads: int | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    score: Callable[[Graph], float] | None = None,
) -> Comparison:
    """Measure both files the same way (same inputs, threads and iteration count); ``score`` (e.g.
    accuracy on a labelled set) is applied to the graph each file loads as."""
    options = RuntimeOptions.resolve(threads=threads)
    probe = Model(load_ecnn(raw_path), options)
    feeds = seeded_feeds(probe, seed, max(samples, 1), shapes)
    before, reference = measure(raw_path, feeds[0], options, iterations)
    after, compressed = measure(compressed_path, feeds[0], options, iterations)
    first_ref, first_new = reference.run(feeds[0]), compressed.run(feeds[0])
    diff = max(
        (
            float(np.max(np.abs(first_ref[n].astype(np.float64) - first_new[n])))
            for n in first_ref
            if first_ref[n].size
        ),
        default=0.0,
    )
    output = reference.graph.outputs[0]
    agree = [
        float(np.mean(top1(reference.run(f)[output]) == top1(compressed.run(f)[output])))
        for f in feeds[:samples]
    ]
    accuracy = (score(load_ecnn(raw_path)), score(load_ecnn(compressed_path))) if score is not None else None
    return Comparison(
        before, after, diff, float(np.mean(agree)) if agree else 1.0, len(agree), iterations, accuracy
    )


def tensor_rows(graph: Graph, plan: dict[str, str]) -> list[TensorRow]:
    """One row per weight layer: how it is stored and what that costs."""
    rows = []
    for layer in weight_layers(graph):
        weights = np.asarray(graph.initializers[layer.tensor])
        storage = plan.get(layer.tensor, "raw")
        rows.append(
            TensorRow(
                layer.node,
                layer.tensor,
                weights.shape,
                density(weights),
                storage,
                weights.nbytes,
                stored_nbytes(weights, storage),
            )
        )
    return rows
