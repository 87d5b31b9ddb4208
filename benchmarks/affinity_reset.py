"""Runs after another library has reset every thread's affinity, as ncnn does when it loads or runs
a model: with edgecnn binding its workers again at the start of each run (``affinity.keep_bound``,
the default) and without (the check patched out), and as a reference with nothing reset.

One process, the three conditions interleaved (the order turning every round); before each run
every thread of the process is given every core again (for the reset conditions) and the calling
thread sleeps 20 ms, as `edgecnn bench` pauses between runs. Medians of wall time and of process
CPU time over wall time. Writes the table into docs/tuning.md between its markers (or prints it
with --print-only).

    .venv/bin/python benchmarks/affinity_reset.py --models squeezenet1.1,mobilenetv2,resnet18 --rounds 40
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np
from conv_gap import _input, _load
from sections import replace_section

from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model
from edgecnn.kernels.cpu.system import affinity, threads

DOC = Path(__file__).parent.parent / "docs" / "tuning.md"
MARK = "tuning:affinity-reset"
PAUSE_S = 0.02


def reset_every_thread() -> None:
    """What ncnn does to the process: every thread may run on every core again."""
    cores = os.sched_getaffinity(0)
    for tid in affinity.thread_ids():
        try:
            os.sched_setaffinity(tid, cores)
        except OSError:
            continue


def conditions(run: Callable[[], object]) -> dict[str, Callable[[], tuple[float, float]]]:
    """Each condition: set-up before the timed run, then (wall ms, CPU ms) of the run."""

    def timed(reset: bool, keep: bool) -> tuple[float, float]:
        if reset:
            reset_every_thread()
        time.sleep(PAUSE_S)
        with mock.patch.object(threads, "_keep_bound", affinity.keep_bound if keep else lambda: None):
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            return (time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3

    return {
        "reset, bound again (default)": lambda: timed(True, True),
        "reset, left as reset": lambda: timed(True, False),
        "nothing reset": lambda: timed(False, True),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="squeezenet1.1,mobilenetv2,resnet18")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--print-only", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    lines = [
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start; "
        f"{args.threads} threads.",
        "",
        f"Command: `.venv/bin/python benchmarks/affinity_reset.py --models {args.models} --rounds {args.rounds}`",
        "",
        f"Median ms per run over {args.rounds} interleaved rounds, each run after a 20 ms sleep; "
        "cpu/wall: process CPU time over wall time.",
        "",
        "| model | condition | ms | cpu/wall |",
        "|---|---|---:|---:|",
    ]
    for name in [m for m in args.models.split(",") if m]:
        model = build_model(name)
        net = _load(model, args.threads)
        feed = dict([_input(model)])
        for _ in range(5):
            net.run(feed)
        runs = conditions(lambda net=net, feed=feed: net.run(feed))
        samples: dict[str, list[tuple[float, float]]] = {c: [] for c in runs}
        order = list(runs)
        for round_ in range(args.rounds):
            shift = round_ % len(order)
            for condition in order[shift:] + order[:shift]:
                samples[condition].append(runs[condition]())
        for condition, values in samples.items():
            wall = float(np.median([w for w, _ in values]))
            ratio = float(np.median([c / w for w, c in values]))
            lines.append(f"| {name} | {condition} | {wall:.2f} | {ratio:.2f} |")
            print(lines[-1], flush=True)
    lines += ["", f"Load average at the end: {os.getloadavg()[0]:.2f}."]
    if args.print_only:
        print("\n".join(lines))
        return
    DOC.write_text(replace_section(DOC.read_text(), MARK, lines))
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
