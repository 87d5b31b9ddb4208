"""Small models (LeNet-5, SimpleCNN) under the conditions of `edgecnn bench`: where a run's time goes
when it starts cold, and what the cached fast run path saves (issue 4, T3).

In `edgecnn bench` every run follows a pause (``gap_s``, 20 ms) and other engines' runs, so caches,
branch predictors and sleeping worker threads are cold; a small model then pays for every line of
Python and every library call around its kernels. This script times, interleaved in one process
with the same pause and the same onnxruntime settings as the bench adapter:

- ``edgecnn``: ``model(x)``, the path the bench adapter takes (the cached ArenaRunner after the
  first call);
- ``edgecnn checked``: the general path every call took before the cache — ``check_feeds``, the
  plan lookup, ``cpu_threads`` and ``execute`` — on the same model and plan;
- ``onnxruntime``: intra-op spinning off (as in `edgecnn bench`).

It then splits edgecnn's cold run into its steps (each kernel call timed) and the rest. Writes
docs/small-models.md (or --output) and prints it.

    .venv/bin/python benchmarks/small_models.py --threads 2 --rounds 40
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.bench.peers import OnnxRuntimeEngine, quiet_thread_pools

quiet_thread_pools()  # as `edgecnn bench` does, before numba's or onnxruntime's pool starts

import edgecnn  # noqa: E402
from edgecnn.bench.machine import cpu_model  # noqa: E402
from edgecnn.bench.zoo import model_path, zoo_entry  # noqa: E402
from edgecnn.kernels.cpu import cpu_threads  # noqa: E402
from edgecnn.runtime.executor import execute  # noqa: E402

Runner = Callable[[np.ndarray], Any]


def machine_line(load: float) -> str:
    state = "shared: other jobs were running" if load > 0.5 else "quiet"
    return f"{cpu_model()}, {os.cpu_count()} cores, no GPU, load average {load:.2f} at start ({state})"


def checked_path(net: edgecnn.Model) -> Runner:
    """What ``Model.__call__`` did on every call before the fast-run cache."""
    wanted = list(net.graph.outputs)

    def run(x: np.ndarray) -> Any:
        feeds = net.check_feeds(x)
        plan = net.plan_for(feeds)
        with cpu_threads(net.options.threads):
            return execute(plan, feeds, wanted)[wanted[0]]

    return run


def interleaved(runners: dict[str, Runner], x: np.ndarray, rounds: int, gap: float) -> dict[str, list[float]]:
    """Each round runs every engine once after a pause, starting from a different one each round."""
    names = list(runners)
    for name in names:  # warm-up: plans, arenas, compiled kernels
        for _ in range(3):
            runners[name](x)
    times: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            time.sleep(gap)
            start = time.perf_counter()
            runners[name](x)
            times[name].append((time.perf_counter() - start) * 1e3)
    return times


def step_split(
    net: edgecnn.Model, x: np.ndarray, ort: Runner, rounds: int, gap: float
) -> list[tuple[str, float]]:
    """Median ms of each kernel call in a cold run (an onnxruntime run and a pause before each),
    and of the whole call; the difference is the Python around the kernels."""
    net(x)
    runner = next(iter(net._fast_runs.values()))
    original = runner._entries
    times: dict[str, list[float]] = {}

    def timed(run: Callable[..., Any], label: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            start = time.perf_counter()
            result = run(*args)
            times.setdefault(label, []).append((time.perf_counter() - start) * 1e3)
            return result

        return call

    runner._entries = tuple(
        (entry[0], timed(entry[1], f"{entry[-1].node.name} ({entry[-1].kernel.name})"), *entry[2:])
        for entry in original
    )
    whole = []
    try:
        for _ in range(rounds):
            time.sleep(gap)
            ort(x)
            time.sleep(gap)
            start = time.perf_counter()
            net(x)
            whole.append((time.perf_counter() - start) * 1e3)
    finally:
        runner._entries = original
    rows = [(label, statistics.median(values)) for label, values in times.items()]
    steps = sum(ms for _, ms in rows)
    total = statistics.median(whole)
    return [*rows, ("sum of steps", steps), ("whole call", total), ("outside the steps", total - steps)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="lenet5:1,simplecnn:1,lenet5:8", help="model:batch,...")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument(
        "--gap", type=float, default=0.02, help="pause before each run, s (edgecnn bench: 0.02)"
    )
    parser.add_argument(
        "--output", type=Path, default=Path(__file__).parent.parent / "docs" / "small-models.md"
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]
    lines = [
        "# Small models: per-run overhead under benchmark conditions",
        "",
        f"Machine: {machine_line(load)}; {args.threads} thread(s), {args.rounds} interleaved rounds "
        f"(medians), a {args.gap * 1e3:.0f} ms pause before every run as in `edgecnn bench`.",
        "",
        f"Command: `.venv/bin/python benchmarks/small_models.py --cases {args.cases} --threads {args.threads} "
        f"--rounds {args.rounds} --gap {args.gap}`",
        "",
        "`edgecnn` is `model(x)` (the cached fast run); `edgecnn checked` is the general path every",
        "call took before it (check_feeds, plan lookup, cpu_threads, execute), same model and plan.",
        "",
        "| model | batch | edgecnn ms | edgecnn checked ms | onnxruntime ms | edgecnn / onnxruntime |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    splits = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        for case in args.cases.split(","):
            name, batch = case.split(":")
            entry = zoo_entry(name)
            path = model_path(name, cache, 1.0, None, 0)
            shape = (int(batch), entry.channels, entry.resolution, entry.resolution)
            x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
            net = edgecnn.load(path, threads=args.threads)
            ort = OnnxRuntimeEngine().prepare(path, args.threads, shape, cache)
            times = interleaved(
                {"edgecnn": net, "checked": checked_path(net), "onnxruntime": ort}, x, args.rounds, args.gap
            )
            ours, old, theirs = (statistics.median(times[k]) for k in ("edgecnn", "checked", "onnxruntime"))
            lines.append(
                f"| {name} | {batch} | {ours:.3f} | {old:.3f} | {theirs:.3f} | {ours / theirs:.2f}x |"
            )
            if not net._fast_runs:
                continue  # a batch split over threads: no single run to take apart
            splits.append((f"{name} batch {batch}", step_split(net, x, ort, args.rounds, args.gap)))
    lines.append(f"\nLoad average at the end: {os.getloadavg()[0]:.2f}.")
    for title, rows in splits:
        lines += ["", f"## {title}: edgecnn's cold run, step by step", "", "| step | ms |", "|---|---:|"]
        lines += [f"| {label} | {ms:.3f} |" for label, ms in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    args.output.write_text(text)


if __name__ == "__main__":
    main()
