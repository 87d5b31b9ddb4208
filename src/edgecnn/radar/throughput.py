"""Seed 003's data-parallel inference: the returns to classify are cut into N equal parts, one per
core, each run by a thread bound to its core. In edgecnn this is the batch split inside a run
(runtime/batch.py, ``batch_parallel="always"``): a batch of returns is cut into one slice per thread,
and the slices run side by side on the model's cores. The measurement below classifies many returns
that way with 1 core and with every core, and gives the throughput per core."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from edgecnn.errors import InputError
from edgecnn.ir.graph import Graph
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions

CHUNK = 4096
"""Returns per run: each run's batch is split among the cores; a chunk bounds the arena's size."""


@dataclass(frozen=True)
class Throughput:
    cores: int
    returns: int
    seconds: float  # the fastest of the repeats

    @property
    def per_second(self) -> float:
        return self.returns / self.seconds

    @property
    def per_core(self) -> float:
        return self.per_second / self.cores


def classify_all(model: Model, returns: np.ndarray, chunk: int = CHUNK) -> np.ndarray:
    """Class index of every return, ``chunk`` returns per run (each run split across the cores)."""
    return np.concatenate(
        [np.asarray(model(returns[i : i + chunk])).argmax(axis=1) for i in range(0, len(returns), chunk)]
    )


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def measure_throughput(
    graph: Graph,
    returns: np.ndarray,
    core_counts: tuple[int, ...] | None = None,
    repeats: int = 3,
    on_run: Callable[[], None] | None = None,
) -> list[Throughput]:
    """Time classifying all of ``returns`` with each core count (default: 1 and all usable cores),
    the fastest of ``repeats`` runs after one warm-up; ``on_run`` is called after every run."""
    if len(returns) == 0:
        raise InputError("no returns to classify")
    if repeats < 1:
        raise InputError(f"repeats must be >= 1, got {repeats}")
    counts = core_counts or tuple(sorted({1, usable_cores()}))
    results = []
    for cores in counts:
        model = Model(graph, RuntimeOptions.resolve(threads=cores, batch_parallel="always"))
        classify_all(model, returns[: min(len(returns), CHUNK)])  # plans and warms the kernels
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            classify_all(model, returns)
            best = min(best, time.perf_counter() - start)
            if on_run is not None:
                on_run()
        results.append(Throughput(cores, len(returns), best))
    return results
