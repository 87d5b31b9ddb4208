"""The local engine end to end: worker processes, a worker killed mid-job, every input exactly once."""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import edgecnn
from batch.support import FACE_MODEL, FACE_TASK
from edgecnn.batch import BatchJob, read_rows, run
from edgecnn.batch.items import list_items
from edgecnn.batch.shards import committed_indices, duplicates
from edgecnn.batch.tasks import Runner
from edgecnn.errors import InputError


def kill_workers_once() -> tuple[Callable[[int], None], list[int]]:
    """An on_rows callback that kills every batch worker (SIGKILL) when the first rows arrive."""
    killed: list[int] = []

    def on_rows(count: int) -> None:
        if killed:
            return
        for child in multiprocessing.active_children():
            if child.name.startswith("edgecnn-batch-") and child.pid:
                os.kill(child.pid, signal.SIGKILL)
                killed.append(child.pid)

    return on_rows, killed


def test_killed_workers_are_replaced_and_their_items_retried(tmp_path: Path, image_folder: Path) -> None:
    job = BatchJob(
        model=str(FACE_MODEL), output=str(tmp_path / "out"), task=FACE_TASK, workers=2, threads=1,
        batch_size=4, shard_rows=8, max_retries=1,
    )  # fmt: skip
    on_rows, killed = kill_workers_once()
    summary = run(job, [image_folder], on_rows=on_rows)
    assert len(killed) == 2
    items = list_items([image_folder])
    assert (summary.items, summary.committed, summary.failed) == (41, 41, 1)
    assert sorted(committed_indices(tmp_path / "out")) == list(range(41))
    net = edgecnn.load(FACE_MODEL, threads=1)
    runner = Runner(net, FACE_TASK, 1)
    expected = runner.infer([runner.prepare(i) for i in items])
    rows = read_rows(tmp_path / "out")
    for row, want in zip(rows, expected):
        assert {k: row[k] for k in ("index", "path", "row", "error")} == {
            k: want[k] for k in ("index", "path", "row", "error")
        }
        if want["error"] is None:
            assert row["top_class"] == want["top_class"] and row["top_label"] == want["top_label"]
            np.testing.assert_allclose(row["top_score"], want["top_score"], rtol=1e-4, atol=1e-6)
    again = run(job, [image_folder])  # everything committed: nothing to do
    assert (again.already_done, again.committed) == (41, 0)


def test_retries_are_bounded(tmp_path: Path, image_folder: Path) -> None:
    job = BatchJob(
        model=str(FACE_MODEL), output=str(tmp_path / "out"), task=FACE_TASK, workers=1, threads=1,
        batch_size=2, output_format="jsonl", max_retries=0,
    )  # fmt: skip
    on_rows, killed = kill_workers_once()
    summary = run(job, [image_folder / "b"], on_rows=on_rows)
    rows = read_rows(tmp_path / "out")
    assert len(killed) == 1 and duplicates(r["index"] for r in rows) == []
    assert [r["index"] for r in rows] == list(range(16)) and summary.committed == 16
    crashed = [r for r in rows if r["error"]]
    assert crashed and all("crashed" in r["error"] for r in crashed)
    assert all(r["top_class"] for r in rows if not r["error"])


def test_a_folder_of_another_job_is_refused(tmp_path: Path, image_folder: Path) -> None:
    job = BatchJob(model=str(FACE_MODEL), output=str(tmp_path), task=FACE_TASK, workers=1, threads=1)
    (tmp_path / "_job.json").write_text('{"model": "another"}', encoding="utf-8")
    with pytest.raises(InputError, match="another job"):
        run(job, [image_folder / "b"])
    with pytest.raises(InputError, match="engine"):
        run(job, [image_folder / "b"], engine="spark")
