"""Offline batch inference: a model over a folder, a list, arrays or a table, on every core of this
machine (``engine="local"``) or on a Ray cluster (``engine="ray"``), resumable after a kill.

``run`` lists the items (edgecnn.batch.items), checks or writes the output folder's manifest,
skips what committed shards already hold, and hands the rest to an engine; every input ends up in
exactly one committed row, with an ``error`` when it could not be processed (docs/scale-out.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from edgecnn.batch.items import Item, list_items
from edgecnn.batch.job import (
    BatchJob,
    core_groups,
    default_split,
    usable_cores,
    weight_bytes,
    with_shared_model,
)
from edgecnn.batch.shards import ShardWriter, committed_indices, prepare_folder, read_rows
from edgecnn.batch.tasks import TaskSpec, columns
from edgecnn.errors import InputError
from edgecnn.limits import available_memory

ENGINES = ("local", "ray")

__all__ = ["ENGINES", "BatchJob", "BatchSummary", "TaskSpec", "plan_split", "read_rows", "run"]


@dataclass(frozen=True)
class BatchSummary:
    """What a run did: items in the job, those already committed before it, rows it committed
    (of which ``failed`` with an error), and how it ran."""

    output: Path
    items: int
    already_done: int
    committed: int
    failed: int
    seconds: float
    engine: str
    workers: int
    threads: int

    @property
    def items_per_s(self) -> float:
        return self.committed / self.seconds if self.seconds > 0 else 0.0


def plan_split(job: BatchJob, cores: int) -> tuple[int, int]:
    """(workers, threads per worker): the job's own, else ``default_split`` for its model."""
    if job.workers and job.threads:
        return job.workers, job.threads
    if job.workers:
        return job.workers, max(1, cores // job.workers)
    if job.threads:
        return max(1, cores // job.threads), job.threads
    return default_split(cores, weight_bytes(job.model, job.weights), available_memory())


def run(
    job: BatchJob,
    inputs: Sequence[str | Path],
    *,
    column: str | None = None,
    engine: str = "local",
    address: str | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_rows: Callable[[int], None] | None = None,
) -> BatchSummary:
    """Run ``job`` over ``inputs`` (see edgecnn.batch.items) into ``job.output``, resuming from its
    committed shards. ``on_start(items to do, items in the job)`` and ``on_rows(count)`` report
    progress."""
    from edgecnn.api import load

    if engine not in ENGINES:
        raise InputError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if address and engine != "ray":
        raise InputError("--address names a Ray cluster: use it with --engine ray")
    items = list_items(inputs, column)
    folder = Path(job.output)
    prepare_folder(folder, job.manifest(items))
    done = set(committed_indices(folder))
    todo: list[Item] = [item for item in items if item.index not in done]
    net = load(job.model, job.weights, threads=1)
    writer = ShardWriter(folder, columns(job.task, net), job.output_format)
    cores = usable_cores()
    workers, threads = plan_split(job, len(cores))
    if todo and (workers > 1 or engine == "ray"):
        job = with_shared_model(job, net, folder)
    del net
    if on_start is not None:
        on_start(len(todo), len(items))
    started = time.perf_counter()
    if engine == "ray":
        from edgecnn.batch.ray_engine import run_ray

        run_ray(job, todo, writer.columns, writer, workers, threads, address, on_rows)
    elif todo:
        from edgecnn.batch.local import LocalEngine

        groups = core_groups(cores, workers, threads) if job.bind else [None] * workers
        LocalEngine(job, groups, threads, writer, on_rows).run(todo)
    return BatchSummary(
        folder,
        len(items),
        len(items) - len(todo),
        writer.rows_written,
        writer.errors_written,
        time.perf_counter() - started,
        engine,
        workers,
        threads,
    )
