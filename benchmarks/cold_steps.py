"""How much of each step of a cold run the second thread does: wall and process CPU time per step.

Each run follows a pause (``--gap-ms``, as `edgecnn bench` pauses between runs) after ``--evict-mb``
MiB have been written; every step's kernel call is timed by wall clock and by the process's CPU
time (all threads). CPU / wall near 2 means both threads worked through the step, near 1 that the
calling thread did it alone. ``--gap-ms 0 --evict-mb 0`` gives the same table back to back.

    .venv/bin/python benchmarks/cold_steps.py --model squeezenet1.1 --gap-ms 20 --evict-mb 8
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from conv_gap import _input, _load

from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model


def time_steps(net: Any) -> dict[str, list[tuple[float, float]]]:
    """Wraps every step of ``net``'s planned run (it must have run once) so that each call appends
    its (wall, process CPU) seconds under "layer (kernel)"; returns that dict, filled by later runs."""
    runner = next(iter(net._fast_runs.values()))
    samples: dict[str, list[tuple[float, float]]] = {}

    def timed(run: Callable[..., Any], label: str) -> Callable[..., Any]:
        def call(*arguments: Any) -> Any:
            wall, cpu = time.perf_counter(), time.process_time()
            result = run(*arguments)
            samples.setdefault(label, []).append((time.perf_counter() - wall, time.process_time() - cpu))
            return result

        return call

    runner._entries = tuple(
        (entry[0], timed(entry[1], f"{entry[-1].node.name} ({entry[-1].kernel.name})"), *entry[2:])
        for entry in runner._entries
    )
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="squeezenet1.1")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--evict-mb", type=int, default=8)
    parser.add_argument("--min-ms", type=float, default=0.15, help="list steps with a median wall above this")
    args = parser.parse_args()
    model = build_model(args.model)
    _, x = _input(model)
    net = _load(model, args.threads)
    net(x)
    samples = time_steps(net)
    junk = np.zeros(max(1, args.evict_mb << 18), dtype=np.float32)
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        if args.evict_mb:
            junk.fill(1.0)
        if args.gap_ms:
            time.sleep(args.gap_ms / 1e3)
        net(x)
    print(
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f}; {args.model}, batch 1, "
        f"{args.threads} threads; before each run {args.evict_mb} MiB written and a {args.gap_ms:g} ms pause; "
        f"medians of {args.rounds} runs."
    )
    print()
    print("| step | wall ms | CPU ms | CPU / wall |")
    print("|---|---:|---:|---:|")
    total_wall = total_cpu = 0.0
    for label, values in samples.items():
        wall = statistics.median(w for w, _ in values) * 1e3
        cpu = statistics.median(c for _, c in values) * 1e3
        total_wall, total_cpu = total_wall + wall, total_cpu + cpu
        if wall >= args.min_ms:
            print(f"| {label} | {wall:.3f} | {cpu:.3f} | {cpu / wall:.2f} |")
    print(f"| all steps | {total_wall:.2f} | {total_cpu:.2f} | {total_cpu / total_wall:.2f} |")


if __name__ == "__main__":
    main()
