"""A batch job's settings, its manifest, and the default split of the cores into workers x threads.

Workers run one model each, data-parallel: nothing is shared between them while they run, so items/s
grows with the workers until the cores are used up, where threads inside one inference stop at the
layers too small to split. The default is therefore one single-threaded worker per core, fewer (and
more threads each) only when the machine's free memory cannot hold one private copy of the
prepared weights per core (``default_split``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgecnn.batch.items import Item, listing_digest
from edgecnn.batch.shards import FORMATS
from edgecnn.batch.tasks import TaskSpec
from edgecnn.errors import InputError
from edgecnn.format.writer import save_ecnn

if TYPE_CHECKING:
    from edgecnn.model import Model

SHARED_MODEL = "_model.ecnn"
"""The model's optimised graph, saved once in the output folder for every worker to map."""
RUNTIME_BYTES = 200 << 20
"""Resident memory of one worker beyond its weights: Python, numpy, numba's compiled kernels."""
WEIGHT_COPIES = 1
"""Private copies of the weights a worker holds: the kernels' prepared (packed) ones (the graph's are
mapped from ``SHARED_MODEL``)."""


@dataclass(frozen=True)
class BatchJob:
    """Everything a batch run needs besides its items; workers receive it whole."""

    model: str
    output: str
    task: TaskSpec = field(default_factory=TaskSpec)
    weights: str | None = None
    output_format: str = "parquet"
    workers: int | None = None  # None: default_split
    threads: int | None = None  # intra-op threads per worker; None: default_split
    batch_size: int = 8
    shard_rows: int = 256
    commit_seconds: float = 10.0
    max_retries: int = 2
    bind: bool = True  # each worker bound to its own core group

    def __post_init__(self) -> None:
        if self.output_format not in FORMATS:
            raise InputError(f"output format must be one of {', '.join(FORMATS)}, got {self.output_format!r}")
        for name in ("workers", "threads"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InputError(f"{name} must be at least 1, got {value}")
        if self.batch_size < 1 or self.shard_rows < 1 or self.max_retries < 0:
            raise InputError("batch size and shard rows must be at least 1, retries at least 0")

    def manifest(self, items: Sequence[Item]) -> dict[str, Any]:
        """What makes two runs the same job (a resumed run must match it): the model file, the
        items and every option that changes a row; not the workers, threads or engine."""
        return {
            "model": model_identity(self.model),
            "weights": model_identity(self.weights) if self.weights else None,
            "items": len(items),
            "listing_sha256": listing_digest(items),
            "task": asdict(self.task),
            "format": self.output_format,
        }


def model_identity(path: str) -> dict[str, Any]:
    """A model file's absolute path, size and modification time (a changed file is another job)."""
    file = Path(path)
    try:
        stat = file.stat()
    except OSError as exc:
        raise InputError(f"model file {path}: {exc.strerror or exc}") from None
    return {"path": str(file.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def weight_bytes(path: str, weights: str | None) -> int:
    """Bytes of the model's files, a stand-in for its weights' size."""
    return sum(Path(p).stat().st_size for p in (path, weights) if p)


def default_split(cores: int, model_bytes: int, free_bytes: int) -> tuple[int, int]:
    """(workers, threads per worker): one single-threaded worker per core, fewer when free memory
    cannot hold that many workers (see the module docstring)."""
    per_worker = RUNTIME_BYTES + WEIGHT_COPIES * model_bytes
    workers = max(1, min(cores, free_bytes // max(per_worker, 1)))
    return int(workers), max(1, cores // int(workers))


def core_groups(cores: Sequence[int], workers: int, threads: int) -> list[list[int]]:
    """The cores each worker is bound to: consecutive groups of ``threads`` cores, wrapping around
    when the workers ask for more cores than there are."""
    ordered = sorted(cores)
    return [[ordered[(w * threads + t) % len(ordered)] for t in range(threads)] for w in range(workers)]


def usable_cores() -> list[int]:
    """The cores this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def with_shared_model(job: BatchJob, net: Model, folder: Path) -> BatchJob:
    """``job`` reading ``net``'s optimised graph (folded and fused) from one .ecnn in ``folder``: the
    workers memory-map its weights, one copy in the page cache for all of them, where loading the
    original file would fold a private copy in each worker."""
    path = folder / SHARED_MODEL
    save_ecnn(net.optimized_graph, path)
    return replace(job, model=str(path), weights=None)
