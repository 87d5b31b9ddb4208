"""The Ray engine on a real local Ray cluster started by the test (127.0.0.1, 2 CPUs, a small object
store, no dashboard): the local engine's rows, and its actor killed mid-job without losing a row."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import edgecnn
from batch.support import FACE_MODEL, FACE_TASK
from edgecnn.batch import BatchJob, read_rows, run
from edgecnn.batch.items import list_items
from edgecnn.batch.tasks import Runner

ray = pytest.importorskip("ray", reason="the Ray engine needs the ray extra: pip install 'edgecnn[ray]'")
psutil = pytest.importorskip("psutil", reason="finding Ray's worker processes needs psutil")


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[None]:
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(
        num_cpus=2,
        object_store_memory=80 << 20,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        configure_logging=False,
    )
    yield
    ray.shutdown()


def kill_an_actor_once() -> tuple[list[int], Callable[[int], None]]:
    """An on_rows callback that SIGKILLs one of Ray Data's map actors when the first rows arrive."""
    killed: list[int] = []

    def on_rows(count: int) -> None:
        if killed:
            return
        for process in psutil.Process().children(recursive=True):
            try:
                title = " ".join(process.cmdline())
            except psutil.Error:
                continue
            if "MapWorker" in title:
                os.kill(process.pid, signal.SIGKILL)
                killed.append(process.pid)
                return

    return killed, on_rows


def test_ray_rows_equal_the_local_engine_and_survive_a_killed_actor(
    local_cluster: None, tmp_path: Path, image_folder: Path
) -> None:
    inputs = [image_folder / "b", image_folder / "a"]
    job = BatchJob(
        model=str(FACE_MODEL), output=str(tmp_path / "out"), task=FACE_TASK, workers=1, threads=1,
        batch_size=4, shard_rows=8,
    )  # fmt: skip
    killed, on_rows = kill_an_actor_once()
    summary = run(job, inputs, engine="ray", on_rows=on_rows)
    assert len(killed) == 1
    assert (summary.items, summary.committed, summary.failed) == (41, 41, 1)
    rows = read_rows(tmp_path / "out")
    runner = Runner(edgecnn.load(FACE_MODEL, threads=1), FACE_TASK, 1)
    expected = runner.infer([runner.prepare(i) for i in list_items(inputs)])
    assert [r["index"] for r in rows] == [r["index"] for r in expected] == list(range(41))
    for row, want in zip(rows, expected):
        assert (row["path"], row["error"], row.get("top_class")) == (
            want["path"],
            want["error"],
            want.get("top_class"),
        )
        if want["error"] is None:
            np.testing.assert_allclose(row["top_score"], want["top_score"], rtol=1e-4, atol=1e-6)
