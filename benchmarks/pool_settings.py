"""Whole models under settings of numba's pool that are fixed when it starts (issue 4): workers
bound to cores or left free (EDGECNN_BIND_THREADS), the threading layer and OpenMP's spin.

Each setting (``--settings``, names from SETTINGS) runs in child processes of its own, alternating
(A, B, B, A, ...). Each child builds the zoo models, warms
them up, then times every model's runs in three conditions, one block of ``--runs`` runs each
(medians): each run after a 20 ms sleep of the calling thread (as `edgecnn bench` pauses between runs, or a camera
pipeline waits for its next frame), after 20 ms of busy waiting, and back to back. It also reports
the process's CPU time over the wall time of the sleep runs (2.0: both threads worked throughout).
Writes the table into docs/tuning.md between the markers named by ``--mark`` (or prints it with
--print-only).

    .venv/bin/python benchmarks/pool_settings.py --models squeezenet1.1,mobilenetv2,resnet50,simplecnn
    .venv/bin/python benchmarks/pool_settings.py --settings omp-spin,tbb --mark tuning:pool-layer
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from sections import replace_section

from edgecnn.bench.machine import cpu_model

DOC = Path(__file__).parent.parent / "docs" / "tuning.md"
SETTINGS = {
    "bound": {"EDGECNN_BIND_THREADS": "1"},
    "free": {"EDGECNN_BIND_THREADS": "0"},
    "tbb": {"NUMBA_THREADING_LAYER": "tbb"},
    "omp-spin": {"NUMBA_THREADING_LAYER": "omp", "GOMP_SPINCOUNT": "20000"},
    "omp-sleep": {"NUMBA_THREADING_LAYER": "omp", "GOMP_SPINCOUNT": "0"},
}
"""Environment of each setting's children (on top of this process's, less the keys any setting sets)."""
CONDITIONS = ("sleep", "busy", "back to back")
PAUSE_S = 0.02


def _child(models: list[str], runs: int, threads: int) -> dict[str, dict[str, float | str]]:
    """In a child process: per model, the median ms of each condition and the sleep runs' CPU / wall."""
    import numba
    from conv_gap import _input, _load

    from edgecnn.bench.zoo import build_model
    from edgecnn.kernels.cpu.system import affinity

    results: dict[str, dict[str, float | str]] = {}
    for name in models:
        model = build_model(name)
        net = _load(model, threads)
        feed = dict([_input(model)])
        for _ in range(5):
            net.run(feed)
        times: dict[str, list[float]] = {c: [] for c in CONDITIONS}
        cpu = wall = 0.0
        for condition in CONDITIONS:  # each condition a block of runs, as a steady stream of frames
            for _ in range(runs):
                if condition == "sleep":
                    time.sleep(PAUSE_S)
                elif condition == "busy":
                    end = time.perf_counter() + PAUSE_S
                    while time.perf_counter() < end:
                        pass
                start, start_cpu = time.perf_counter(), time.process_time()
                net.run(feed)
                elapsed = time.perf_counter() - start
                times[condition].append(elapsed * 1e3)
                if condition == "sleep":
                    wall += elapsed
                    cpu += time.process_time() - start_cpu
        results[name] = {c: float(np.median(t)) for c, t in times.items()}
        results[name]["cpu/wall"] = cpu / wall
        results[name]["bound"] = len(affinity.bound)
        results[name]["layer"] = numba.threading_layer()
    return results


def _run_child(setting: str, models: list[str], runs: int, threads: int) -> dict[str, dict[str, float | str]]:
    chosen = {key for values in SETTINGS.values() for key in values}
    env = {**{k: v for k, v in os.environ.items() if k not in chosen}, **SETTINGS[setting]}
    command = [sys.executable, __file__, "--child", "--models", ",".join(models), "--runs", str(runs)]
    command += ["--threads", str(threads)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@contextlib.contextmanager
def _busy(core: int | None) -> Iterator[None]:
    """Another process spinning on ``core`` for the duration (None: nothing), as a device's camera
    pipeline or UI thread would take a core from the engine."""
    if core is None:
        yield
        return
    spin = f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"
    hog = subprocess.Popen([sys.executable, "-c", spin])
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="squeezenet1.1,mobilenetv2,resnet50,simplecnn")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--processes", type=int, default=2, help="child processes per setting")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--settings", default="bound,free", help="two or more of: " + ", ".join(SETTINGS))
    parser.add_argument("--mark", default="tuning:bind-threads", help="the docs/tuning.md section written")
    parser.add_argument(
        "--busy-core", type=int, default=None, help="keep this core busy with another process throughout"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--print-only", action="store_true")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    if args.child:
        print(json.dumps(_child(models, args.runs, args.threads)))
        return
    load = os.getloadavg()[0]
    settings = [s for s in args.settings.split(",") if s]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown or len(settings) < 2:
        parser.error(f"--settings takes two or more of {', '.join(SETTINGS)} (got {args.settings})")
    seen: dict[str, list[dict[str, dict[str, float | str]]]] = {s: [] for s in settings}
    with _busy(args.busy_core):
        for process in range(args.processes):
            order = settings if process % 2 == 0 else list(reversed(settings))
            for setting in order:
                seen[setting].append(_run_child(setting, models, args.runs, args.threads))
    columns = [*CONDITIONS, "cpu/wall"]
    lines = [
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; {args.threads} threads.",
        "",
        f"Command: `.venv/bin/python benchmarks/pool_settings.py --models {args.models} --runs {args.runs} "
        f"--processes {args.processes} --settings {args.settings} --mark {args.mark}"
        + (f" --busy-core {args.busy_core}`" if args.busy_core is not None else "`"),
        "",
        *(
            [
                f"Core {args.busy_core} was kept busy by another process (a Python loop bound to it) throughout.",
                "",
            ]
            if args.busy_core is not None
            else []
        ),
        "Settings: "
        + "; ".join(f"{s}: " + " ".join(f"{k}={v}" for k, v in SETTINGS[s].items()) for s in settings)
        + ".",
        "",
        f"Median ms per run ({args.processes} processes per setting, {args.runs} runs of each condition "
        "in each, the median of the processes' medians); cpu/wall: process CPU time over wall time "
        "of the runs after a sleep.",
        "",
        "| model | setting (layer, workers bound) | " + " | ".join(columns) + " |",
        "|---|---|" + "---:|" * len(columns),
    ]
    for name in models:
        for setting in settings:
            values = [float(np.median([float(child[name][c]) for child in seen[setting]])) for c in columns]
            bound = int(max(float(child[name]["bound"]) for child in seen[setting]))
            layers = "/".join(sorted({str(child[name]["layer"]) for child in seen[setting]}))
            label = f"{setting} ({layers}, {bound})"
            cells = [f"{v:.2f}" for v in values]
            lines.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    if args.print_only:
        print("\n".join(lines))
        return
    DOC.write_text(replace_section(DOC.read_text(), args.mark, lines))
    print("\n".join(lines))
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
