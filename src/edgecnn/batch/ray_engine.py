"""The Ray engine: the same job through Ray Data on a Ray cluster (``--engine ray``).

The items become a Ray Dataset; ``map_batches`` runs them through a pool of actors, each holding
one loaded model (``RayPredictor``), and the driver streams the result batches into the same
committed shards as the local engine. The model file travels once through the object store: each
node's first actor writes it to a folder of the node's temporary directory named by its SHA-256,
and every actor of that node loads (memory-maps, for .ecnn) that one file.

Exactly once: Ray Data restarts a dead actor and runs its unfinished batches again (at least once),
so a batch can be computed twice; the driver is the only writer and keeps a row only if its item
index is not committed yet, and commits whole shards atomically. A killed driver loses only the
rows not committed; the same command resumes from the shards like the local engine.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from edgecnn.batch.items import Item
from edgecnn.batch.job import BatchJob
from edgecnn.batch.shards import ShardWriter, arrow_schema, write_atomically
from edgecnn.batch.tasks import Runner
from edgecnn.errors import EdgeCNNError

RAY_EXTRA = "pip install 'edgecnn[ray]'"
BLOCKS_PER_ACTOR = 4
"""Input blocks per actor: enough to keep every actor busy and to bound what a crash recomputes."""


def import_ray() -> Any:
    """Ray with Ray Data, or an error naming the extra that installs it."""
    try:
        import ray
        import ray.data  # the extra installs ray[data]; fail here, not in the first map
    except ImportError:
        raise EdgeCNNError(f"--engine ray needs Ray Data: {RAY_EXTRA}") from None
    return ray


def model_files(job: BatchJob) -> dict[str, bytes]:
    """The model's files by name (model, then weights), read once on the driver."""
    files = {}
    for path in (job.model, job.weights):
        if path:
            try:
                files[Path(path).name] = Path(path).read_bytes()
            except OSError as exc:
                raise EdgeCNNError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    return files


def place_files(files: dict[str, bytes]) -> list[Path]:
    """Write the shipped files once per node (under a folder named by their digest); their paths."""
    digest = hashlib.sha256()
    for name, data in files.items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    folder = Path(tempfile.gettempdir()) / "edgecnn-batch-models" / digest.hexdigest()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in files.items():
        path = folder / name
        if not path.exists() or path.stat().st_size != len(data):
            write_atomically(path, lambda f, data=data: f.write(data))
        paths.append(path)
    return paths


class RayPredictor:
    """A Ray Data actor: the job's model loaded once, then a Runner over each batch of items."""

    def __init__(self, job: BatchJob, files: list[Any], threads: int, columns: dict[str, str]) -> None:
        import ray

        paths = place_files(ray.get(files[0]))
        local = dataclasses.replace(
            job, model=str(paths[0]), weights=str(paths[1]) if len(paths) > 1 else None
        )
        from edgecnn.api import load

        self.runner = Runner(load(local.model, local.weights, threads=threads), job.task, job.batch_size)
        self.schema = arrow_schema(columns)

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        items = [Item(**row) for row in batch.to_pylist()]
        rows = self.runner.infer([self.runner.prepare(item) for item in items])
        return pa.Table.from_pylist([{c: r.get(c) for c in self.schema.names} for r in rows], self.schema)


def run_ray(
    job: BatchJob,
    items: Sequence[Item],
    columns: dict[str, str],
    writer: ShardWriter,
    actors: int,
    threads: int,
    address: str | None,
    on_rows: Callable[[int], None] | None = None,
) -> None:
    """Run ``items`` on the Ray cluster at ``address`` (None: the one this process already joined,
    else a new local one) with ``actors`` actors of ``threads`` CPUs each; rows go to ``writer``."""
    ray = import_ray()
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    if not items:
        return
    files = ray.put(model_files(job))
    blocks = max(1, min(len(items), actors * BLOCKS_PER_ACTOR, len(items) // job.batch_size or 1))
    dataset = ray.data.from_items(
        [dataclasses.asdict(item) for item in items], override_num_blocks=blocks
    ).map_batches(
        RayPredictor,
        fn_constructor_kwargs={"job": job, "files": [files], "threads": threads, "columns": columns},
        batch_size=job.batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=threads,
    )
    wanted = {item.index for item in items}
    buffer: list[dict[str, Any]] = []
    last_commit = time.monotonic()
    for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
        fresh = [row for row in batch.to_pylist() if row["index"] in wanted]
        wanted.difference_update(row["index"] for row in fresh)
        buffer.extend(fresh)
        if on_rows is not None:
            on_rows(len(fresh))
        if len(buffer) >= job.shard_rows or time.monotonic() - last_commit >= job.commit_seconds:
            writer.commit(buffer)
            buffer, last_commit = [], time.monotonic()
    writer.commit(buffer)
    if wanted:
        raise EdgeCNNError(
            f"the Ray job ended without rows for {len(wanted)} item(s); run it again to resume"
        )
