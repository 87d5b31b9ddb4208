"""Structure-aware fuzzing of one model format, resumable, with a corpus of minimised findings.

Case ``i`` of a run is seed file ``i mod seeds`` mutated by a generator seeded with (seed, format,
i), so a run stops and resumes from its state file and any case can be replayed (``--replay I``).
Every case runs in a child (worker.py) whose address space is capped and whose loads get a memory
budget (EDGECNN_MEMORY_LIMIT): a load that passes the cap is reported as ``memory``, a case that
takes longer than ``--timeout`` as ``timeout``. A finding is any exception outside EdgeCNNError, a
MemoryError, a case whose peak RSS grows by more than the budget, a dead or stuck worker, or an
error message longer than MESSAGE_LIMIT, once it has happened a second time on the same case. The
first case of each signature is minimised and saved to tests/fuzz_corpus/<format>/ (run by
tests/reliability/test_fuzz_corpus.py), and so is the first case of a session that meets a known
signature whose saved case no longer fails (fixed, so this is another bug at the same place).

    .venv/bin/python lab/fuzz/driver.py --format darknet --seconds 600
    .venv/bin/python lab/fuzz/driver.py --format darknet --replay 1234 --out /tmp/case
    .venv/bin/python lab/fuzz/driver.py --check-corpus    # every saved case, results as JSON
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import random
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from minimise import minimise

from edgecnn.atomic import atomic_write
from edgecnn.errors import ConfigurationError, ModelFormatError
from edgecnn.limits import parse_size

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FORMATS = ("onnx", "caffe", "darknet", "ecnn", "radar")
FINDINGS = ("crash", "memory", "over budget", "timeout", "died", "long message")
MESSAGE_LIMIT = 1000
"""Error messages longer than this are findings: messages must stay readable (issue 34)."""
RESTART_EVERY = 2000
"""Cases between worker restarts, so one leak cannot build up over a long run."""
CONFIRM_TIMEOUT_FACTOR = 10
"""A timeout is confirmed with this many times the timeout: numba compiles a kernel the first time
a case needs it after its source changed, which can take longer than a case on a loaded machine."""

Case = dict[str, bytes]


class Worker:
    """worker.py in a child process, one case at a time, restarted when it dies or hangs."""

    def __init__(self, budget: str, cap: int, timeout: float) -> None:
        self.env = {**os.environ, "EDGECNN_MEMORY_LIMIT": budget, "EDGECNN_NUM_THREADS": "1",
                    "PYTHONPATH": str(REPO / "src")}  # fmt: skip
        self.cap, self.timeout = cap, timeout
        self.budget = parse_size(budget, "--budget")
        self.process: subprocess.Popen[str] | None = None
        self.served = 0

    def _start(self) -> subprocess.Popen[str]:
        command = [sys.executable, str(HERE / "worker.py"), "--cap", str(self.cap)]
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=self.env
        )
        assert process.stdout is not None
        ready = process.stdout.readline()
        if not ready.startswith('{"ready"'):
            raise RuntimeError(f"the worker did not start: {ready!r}")
        self.served = 0
        return process

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def run(self, folder: Path, timeout: float | None = None) -> dict[str, Any]:
        """The worker's result for the case in ``folder`` (``timeout``: seconds, default the worker's)."""
        timeout = timeout or self.timeout
        if self.process is None or self.served >= RESTART_EVERY:
            self.stop()
            self.process = self._start()
        process = self.process
        assert process.stdin is not None and process.stdout is not None
        self.served += 1
        try:
            process.stdin.write(f"{folder}\n")
            process.stdin.flush()
        except BrokenPipeError:
            self.stop()
            return {"outcome": "died", "type": "BrokenPipe", "stage": "start"}
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        if not ready:
            self.stop()
            return {"outcome": "timeout", "type": f"over {self.timeout:.0f} s", "stage": "?"}
        line = process.stdout.readline()
        if not line:
            code = process.wait()
            self.process = None
            return {"outcome": "died", "type": f"exit {code}", "stage": "?"}
        result: dict[str, Any] = json.loads(line)
        if result.get("peak_rss_growth", 0) > self.budget and result["outcome"] not in FINDINGS:
            result.update(outcome="over budget", type=result["outcome"], where=result.get("stage", "run"))
        if result["outcome"] in ("memory", "over budget"):
            self.stop()  # the child's heap is suspect, and its peak RSS must start low again
        if result["outcome"] == "error" and result.get("length", 0) > MESSAGE_LIMIT:
            result["outcome"] = "long message"
        return result


def signature(result: dict[str, Any]) -> str:
    """What makes two findings the same: outcome, exception type and where it was raised
    (numbers removed from the place, so the same line reached with other values matches)."""
    where = re.sub(r"\d+", "N", str(result.get("where", result.get("stage", ""))))
    return f"{result['outcome']}|{result.get('type', '')}|{where}"


def confirm(worker: Worker, folder: Path, result: dict[str, Any], timeout: float) -> bool:
    """Whether a rerun of the case in ``folder`` ends in the same finding as ``result`` (a timeout
    rerun with CONFIRM_TIMEOUT_FACTOR times the patience)."""
    patience = timeout * CONFIRM_TIMEOUT_FACTOR if result["outcome"] == "timeout" else None
    return signature(worker.run(folder, patience)) == signature(result)


def write_case(case: Case, folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name, data in case.items():
        (folder / name).write_bytes(data)


def make_case(target: Any, seeds: list[Case], seed: int, index: int) -> Case:
    rng = random.Random(f"{seed}:{target.NAME}:{index}")
    case = seeds[index % len(seeds)]
    for _ in range(rng.choice((1, 1, 1, 2, 4))):
        case = target.mutate_case(case, rng)
    return case


def save_finding(
    corpus: Path, fmt: str, case: Case, result: dict[str, Any], index: int, seed: int, again: bool = False
) -> Path:
    """The minimised case and what it raised, in a folder named after its signature (and the case's
    number when ``again``: the signature's saved case no longer fails, this one does)."""
    digest = hashlib.sha256(signature(result).encode()).hexdigest()[:10]
    slug = re.sub(r"[^a-z0-9]+", "-", f"{result['outcome']}-{result.get('type', '')}".lower()).strip("-")
    folder = corpus / fmt / (f"{slug}-{digest}-case{index}" if again else f"{slug}-{digest}")
    if (folder / "case.json").exists():  # found before (another run): keep that case and its triage
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    record = {key: result.get(key) for key in ("outcome", "type", "stage", "where", "message")}
    record.update(format=fmt, signature=signature(result), case=index, seed=seed)
    files = {**case, "case.json": (json.dumps(record, indent=1) + "\n").encode()}
    for name, data in files.items():
        atomic_write(
            folder / name,
            lambda file, data=data: file.write(data),
            error=ModelFormatError,
            what="corpus file",
        )
    return folder


def reproduces(worker: Worker, folder: Path, key: str) -> bool:
    """Whether the saved case in ``folder`` still ends in the finding ``key`` (False once fixed)."""
    return folder.is_dir() and signature(worker.run(folder)) == key


def minimise_finding(worker: Worker, case: Case, key: str, probe: Path) -> Case:
    """``case`` made as small as it can be while it still raises the finding ``key``."""

    def still_fails(candidate: Case) -> bool:
        write_case(candidate, probe)
        return signature(worker.run(probe)) == key

    return minimise(case, still_fails)


def load_state(path: Path, fmt: str, seed: int) -> dict[str, Any]:
    if path.exists():
        state: dict[str, Any] = json.loads(path.read_text())
        if state["format"] != fmt or state["seed"] != seed:
            raise SystemExit(f"{path} belongs to a run of {state['format']} with seed {state['seed']}")
        return state
    return {"format": fmt, "seed": seed, "next_case": 0, "seconds": 0.0, "counts": {}, "findings": {},
            "max_peak_rss_growth": 0}  # fmt: skip


def save_state(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(state, indent=1, sort_keys=True) + "\n"
    atomic_write(path, lambda file: file.write(text.encode()), error=ConfigurationError, what="fuzz state")


def check_corpus(corpus: Path, fmt: str | None, worker: Worker) -> None:
    """Run every saved case (of ``fmt``, or of all formats) and print {folder: result} as JSON."""
    results = {}
    try:
        for record in sorted(corpus.glob(f"{fmt or '*'}/*/case.json")):
            result = worker.run(record.parent)
            result["finding"] = result["outcome"] in FINDINGS
            results[str(record.parent.relative_to(corpus))] = result
    finally:
        worker.stop()
    print(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--format", choices=FORMATS, help="the format to fuzz (all, with --check-corpus)")
    parser.add_argument("--cases", type=int, default=100_000, help="stop when the run has done this many")
    parser.add_argument(
        "--seconds", type=float, default=float("inf"), help="stop after this long (this session)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--state", type=Path, help="default lab/fuzz/state/<format>.json")
    parser.add_argument("--corpus", type=Path, default=REPO / "tests" / "fuzz_corpus")
    parser.add_argument("--budget", default="512M", help="EDGECNN_MEMORY_LIMIT of the worker")
    parser.add_argument("--cap", type=int, default=2 << 30, help="worker address space above its warm size")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds one case may take")
    parser.add_argument("--replay", type=int, help="write case I to --out and run it once")
    parser.add_argument("--out", type=Path, help="folder for --replay")
    parser.add_argument("--check-corpus", action="store_true", help="run the corpus's cases, print JSON")
    args = parser.parse_args()
    if args.check_corpus:
        check_corpus(args.corpus, args.format, Worker(args.budget, args.cap, args.timeout))
        return
    if args.format is None:
        parser.error("--format is required")
    sys.path.insert(0, str(REPO / "src"))
    target = importlib.import_module(f"target_{args.format}")
    seeds: list[Case] = target.seeds()
    worker = Worker(args.budget, args.cap, args.timeout)
    if args.replay is not None:
        folder = args.out or Path(tempfile.mkdtemp(prefix="fuzz-case-"))
        write_case(make_case(target, seeds, args.seed, args.replay), folder)
        print(folder, json.dumps(worker.run(folder)))
        worker.stop()
        return
    state_path = args.state or HERE / "state" / f"{args.format}.json"
    state = load_state(state_path, args.format, args.seed)
    counts = Counter(state["counts"])
    met: set[str] = set()  # finding signatures met in this session
    started = time.monotonic()
    last_save = started
    with tempfile.TemporaryDirectory(prefix="fuzz-") as scratch:
        folder = Path(scratch) / "case"
        try:
            while state["next_case"] < args.cases and time.monotonic() - started < args.seconds:
                index = state["next_case"]
                case = make_case(target, seeds, args.seed, index)
                write_case(case, folder)
                result = worker.run(folder)
                counts[result["outcome"]] += 1
                growth = int(result.get("peak_rss_growth", 0))
                state["max_peak_rss_growth"] = max(state["max_peak_rss_growth"], growth)
                key = signature(result)
                if result["outcome"] in FINDINGS and not confirm(worker, folder, result, args.timeout):
                    counts["not reproduced"] += 1  # a first compile's memory, a loaded machine's timeout
                elif result["outcome"] in FINDINGS:
                    found = state["findings"].setdefault(key, {"count": 0, "first_case": index})
                    found["count"] += 1
                    found["last_case"] = index
                    saved = found.get("corpus")
                    # a signature met again in a later session after its saved case was fixed is
                    # another bug behind the same place: saved as a case of its own
                    if key not in met and (saved is None or not reproduces(worker, Path(saved), key)):
                        print(
                            f"case {index}: {'new' if saved is None else 'recurring'} finding {key}: "
                            f"{result.get('message', '')[:120]}",
                            flush=True,
                        )
                        if result["outcome"] not in ("timeout", "died"):
                            case = minimise_finding(worker, case, key, Path(scratch) / "probe")
                        found["corpus"] = str(
                            save_finding(
                                args.corpus, args.format, case, result, index, args.seed, saved is not None
                            )
                        )
                    met.add(key)
                state["next_case"] = index + 1
                if time.monotonic() - last_save > 30:
                    elapsed = state["seconds"] + time.monotonic() - started
                    state["counts"] = dict(counts)
                    save_state(state_path, {**state, "seconds": elapsed})
                    last_save = time.monotonic()
                    done = index + 1
                    print(f"{done} cases, {done / elapsed:.1f}/s, {dict(counts)}", flush=True)
        finally:
            worker.stop()
            state["seconds"] += time.monotonic() - started
            state["counts"] = dict(counts)
            save_state(state_path, state)
    done = state["next_case"]
    print(json.dumps({"format": args.format, "cases": done, "cases_per_second": round(done / state["seconds"], 2),
                      "counts": state["counts"], "findings": len(state["findings"])}))  # fmt: skip


if __name__ == "__main__":
    main()
