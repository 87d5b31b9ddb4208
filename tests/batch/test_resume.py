"""``kill -9`` of ``edgecnn batch`` at random points, then the same command: every input exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from batch.support import FACE_MODEL
from edgecnn.batch.shards import committed_indices, duplicates, read_rows

TRIALS = 3


def batch_command(listing: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "edgecnn", "batch", str(FACE_MODEL), str(listing), "-o", str(out),
        "--bgr", "--scale", str(1 / 255), "--softmax", "--workers", "1", "--threads", "1",
        "--batch-size", "2", "--shard-rows", "4", "--quiet",
    ]  # fmt: skip


def test_kill_9_at_random_points_then_resume(tmp_path: Path, image_folder: Path) -> None:
    images = sorted(str(p) for p in image_folder.rglob("*.*") if p.name != "broken.jpg")
    listing = tmp_path / "inputs.txt"
    listing.write_text("\n".join(images * 5 + [str(image_folder / "a" / "broken.jpg")]) + "\n")
    total = len(images) * 5 + 1
    out = tmp_path / "out"
    rng = random.Random(33)
    killed_mid_job = 0
    for _ in range(TRIALS):
        before = len(committed_indices(out))
        job = subprocess.Popen(batch_command(listing, out), start_new_session=True)
        while job.poll() is None and len(committed_indices(out)) == before:
            time.sleep(0.05)  # kill once this run has committed something, a random moment later
        time.sleep(rng.uniform(0.0, 0.3))
        if job.poll() is None:
            os.kill(job.pid, signal.SIGKILL)
            killed_mid_job += 1
        job.wait()
        assert duplicates(committed_indices(out)) == []
    assert killed_mid_job > 0
    finished = subprocess.run(batch_command(listing, out), capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    rows = read_rows(out)
    assert [r["index"] for r in rows] == list(range(total))
    errors = [r["path"] for r in rows if r["error"]]
    assert errors == [str(image_folder / "a" / "broken.jpg")]
