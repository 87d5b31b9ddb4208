"""Is every input exactly once in `edgecnn batch`'s output after `kill -9` at random moments?

Issue 33: output is written in committed shards; `kill -9` of the job (or of one worker) followed by
the same command resumes from what was committed, and the final output has every input exactly
once. This runs --trials trials (20 by default), each in a fresh output folder:

1. `edgecnn batch` with the bundled face classifier over --images crops (written once into
   --workdir, one unreadable file among them), 2 workers, small shards (--shard-rows);
2. at a random moment, SIGKILL to the whole job's coordinator (even trials) or to one of its
   workers (odd trials: the job must go on by itself). Every fifth trial kills during start-up
   (uniform over the reference run's time to its first shard); the others wait for the first
   committed shard, then a time uniform over the reference run's time from its first shard to its
   last (mid-job);
3. after a coordinator kill, a check that its workers exit by themselves (their pipe closes), then
   the same command again, to completion;
4. the committed rows compared with the reference run's: the same indices, each once, with the
   same results (class, label) and the same one error row.

    .venv/bin/python lab/batch_resume_trials.py [--trials 20] [--images 1000] [--shard-rows 16]

It prints one line per trial (what was killed, when, rows committed at the kill, the verdict) and a
summary with the command, the machine line, the date and the load; it exits non-zero if any trial
lost or repeated an input.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from common import machine_line
from edgecnn.batch.shards import committed_indices, duplicates, read_rows
from edgecnn.vision.faces import BUNDLED_MODEL, bundled_path

MODEL = bundled_path(BUNDLED_MODEL)


def write_inputs(folder: Path, count: int) -> Path:
    """``count`` crops of the two bundled samples and one file that is not an image."""
    from PIL import Image

    if len(list(folder.glob("*.jpg"))) == count + 1:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    samples = [Image.open(bundled_path(f"simplecnn/samples/{n}.jpg")).convert("RGB") for n in ("face", "bg")]
    rng = random.Random(33)
    for i in range(count):
        image = samples[i % 2]
        side = rng.randint(min(image.size) // 2, min(image.size))
        x0, y0 = rng.randint(0, image.width - side), rng.randint(0, image.height - side)
        image.crop((x0, y0, x0 + side, y0 + side)).save(folder / f"img{i:05d}.jpg")
    (folder / "broken.jpg").write_bytes(b"not a jpeg")
    return folder


def command(inputs: Path, out: Path, shard_rows: int) -> list[str]:
    return [
        *(sys.executable, "-m", "edgecnn", "batch", str(MODEL), str(inputs), "-o", str(out)),
        *("--bgr", "--scale", str(1 / 255), "--softmax", "--workers", "2", "--threads", "1"),
        *("--batch-size", "4", "--shard-rows", str(shard_rows), "--quiet"),
    ]


def results(out: Path) -> dict[int, Any]:
    return {
        r["index"]: (r["path"], r["error"] is None, r["top_class"], r["top_label"]) for r in read_rows(out)
    }


def workers_of(pid: int) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children() if "spawn_main" in " ".join(p.cmdline())]
    except psutil.Error:
        return []


def run_timed(inputs: Path, out: Path, shard_rows: int, total: int) -> tuple[float, float]:
    """An unkilled run: seconds to its first committed shard, and to its last row committed."""
    started = time.perf_counter()
    job = subprocess.Popen(command(inputs, out, shard_rows), stdout=subprocess.DEVNULL)
    first = wait_first_shard(job, out) - started
    while job.poll() is None and len(committed_indices(out)) < total:
        time.sleep(0.02)
    last = time.perf_counter() - started
    if job.wait() != 0:
        raise SystemExit("the reference run failed")
    return first, last


def wait_first_shard(job: subprocess.Popen, out: Path) -> float:
    while job.poll() is None and not committed_indices(out):
        time.sleep(0.02)
    return time.perf_counter()


def trial(
    number: int, args: argparse.Namespace, inputs: Path, timing: tuple[float, float], reference: dict
) -> bool:
    rng = random.Random(1000 + number)
    first, duration = timing
    with tempfile.TemporaryDirectory(prefix="batch-trial-") as folder:
        out = Path(folder) / "out"
        target = "worker" if number % 2 else "job"
        job = subprocess.Popen(
            command(inputs, out, args.shard_rows), start_new_session=True, stdout=subprocess.DEVNULL
        )
        started = time.perf_counter()
        if number % 5 == 4:
            time.sleep(rng.uniform(0.0, first))
        else:
            wait_first_shard(job, out)
            time.sleep(rng.uniform(0.0, duration - first))
        delay = time.perf_counter() - started
        note = "finished before the kill"
        if job.poll() is None:
            workers = workers_of(job.pid)
            if target == "job":
                os.kill(job.pid, signal.SIGKILL)
                job.wait()
                _, alive = psutil.wait_procs(workers, timeout=30)
                note = (
                    f"job killed, {len(committed_indices(out))} rows committed; {len(alive)} worker(s) left"
                )
                for process in alive:
                    process.kill()
            elif workers:
                victim = rng.choice(workers)
                victim.send_signal(signal.SIGKILL)
                note = f"worker {victim.pid} killed at {len(committed_indices(out))} rows committed"
            else:
                note = "no worker yet: job left alone"
        job.wait()
        final = subprocess.run(command(inputs, out, args.shard_rows), capture_output=True, text=True)
        if target == "job" and note.startswith("job killed"):
            resumed = re.search(r"\((\d+) before\)", final.stdout)
            note += f"; the rerun found {resumed.group(1) if resumed else '?'} committed"
        indices = committed_indices(out)
        ok = (
            final.returncode == 0
            and not duplicates(indices)
            and sorted(indices) == sorted(reference)
            and results(out) == reference
        )
        print(
            f"trial {number:2d}: {target} at {delay:5.2f} s: {note}: {'ok' if ok else 'FAILED'}", flush=True
        )
        if not ok:
            print(final.stderr[-2000:], file=sys.stderr)
        return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--shard-rows", type=int, default=16)
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "edgecnn-batch-lab"))
    args = parser.parse_args()
    inputs = write_inputs(Path(args.workdir) / f"resume-images-{args.images}", args.images)
    print(f"`.venv/bin/python lab/{Path(__file__).name} {shlex.join(sys.argv[1:])}`")
    print(f"{machine_line()}; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC\n")
    with tempfile.TemporaryDirectory(prefix="batch-reference-") as folder:
        timing = run_timed(inputs, Path(folder) / "out", args.shard_rows, args.images + 1)
        reference = results(Path(folder) / "out")
    print(
        f"reference run: {len(reference)} rows, first shard after {timing[0]:.1f} s, last after {timing[1]:.1f} s\n",
        flush=True,
    )
    passed = sum(trial(n, args, inputs, timing, reference) for n in range(args.trials))
    print(
        "\n"
        + json.dumps({"trials": args.trials, "exactly_once": passed, "inputs": len(reference)})
        + f"\nload average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    sys.exit(0 if passed == args.trials else 1)


if __name__ == "__main__":
    main()
