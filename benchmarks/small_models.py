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
- ``onnxruntime``: the bench adapter's settings (its workers spin only while a run is under way).

It then splits edgecnn's cold run into its steps (each kernel call timed) and the rest. With
``--before COMMIT`` it also compares this working tree with the package as of COMMIT (``git archive``
into a temporary directory): the two cannot share a process, so child processes of each alternate,
every one timing edgecnn interleaved with onnxruntime, and the table gives both engines' medians
and the ratio (which cancels most of the drift between processes). Prints the tables and writes
them into docs/small-models.md (or --output) between its two marker comments, keeping the prose.

    .venv/bin/python benchmarks/small_models.py --threads 2 --rounds 40 --before 9672852
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.bench.peers import OnnxRuntimeEngine, quiet_thread_pools

quiet_thread_pools()  # as `edgecnn bench` does, before numba's or onnxruntime's pool starts

from revisions import package_sources, run_child  # noqa: E402

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


def parse_case(case: str, threads: int) -> tuple[str, int, int]:
    """``model:batch`` or ``model:batch:threads`` (default: --threads) -> (model, batch, threads)."""
    parts = case.split(":")
    return parts[0], int(parts[1]), int(parts[2]) if len(parts) > 2 else threads


def measure_case(case: str, threads: int, rounds: int, gap: float) -> dict[str, float]:
    """Median ms of edgecnn's ``model(x)`` and of onnxruntime, interleaved, for one case.
    Only uses what every version of the package has (a child process of ``--before`` runs it)."""
    name, batch, threads = parse_case(case, threads)
    entry = zoo_entry(name)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        path = model_path(name, cache, 1.0, None, 0)
        shape = (int(batch), entry.channels, entry.resolution, entry.resolution)
        x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        net = edgecnn.load(path, threads=threads)
        ort = OnnxRuntimeEngine().prepare(path, threads, shape, cache)
        times = interleaved({"edgecnn": net, "onnxruntime": ort}, x, rounds, gap)
    return {engine: statistics.median(values) for engine, values in times.items()}


def before_and_after(args: argparse.Namespace, processes: int) -> list[str]:
    """Rows comparing the package at ``args.before`` with this tree, processes alternating."""
    here = Path(__file__).resolve()
    lines = [
        "",
        f"### Before (commit {args.before}) and after (this tree)",
        "",
        f"{processes} child processes per version, alternating; each times {args.rounds} interleaved "
        "rounds of edgecnn and onnxruntime. Medians over the processes' medians.",
        "",
        "| model | batch | threads | before ms | onnxruntime ms | before / ort | after ms | onnxruntime ms "
        "| after / ort |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        sources = package_sources(args.before, Path(tmp))
        for case in args.cases.split(","):
            results: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
            for _ in range(processes):
                for version, source in sources.items():
                    command = [sys.executable, str(here), "--measure", case, "--threads", str(args.threads)]
                    command += ["--rounds", str(args.rounds), "--gap", str(args.gap)]
                    results[version].append(run_child(source, command))  # type: ignore[arg-type]
            name, batch, threads = parse_case(case, args.threads)
            cells = []
            for version in ("before", "after"):
                ours = statistics.median(r["edgecnn"] for r in results[version])
                theirs = statistics.median(r["onnxruntime"] for r in results[version])
                ratio = statistics.median(r["edgecnn"] / r["onnxruntime"] for r in results[version])
                cells += [f"{ours:.3f}", f"{theirs:.3f}", f"{ratio:.2f}x"]
            lines.append(f"| {name} | {batch} | {threads} | " + " | ".join(cells) + " |")
    return lines


def cold_probes(rounds: int, gap: float, threads: int) -> list[str]:
    """What single operations cost back to back and cold (after a pause and an onnxruntime run of
    LeNet-5): an empty Python call, one ctypes call into OpenBLAS, a compiled call with and without
    a parallel region (numba's threading layer and OMP_WAIT_POLICY as in `edgecnn bench`), and
    onnxruntime's whole LeNet-5 run."""
    import numba

    from edgecnn.kernels.cpu.system import threads as thread_budget

    @numba.njit(parallel=True)
    def parallel_region(a: np.ndarray) -> None:
        for i in numba.prange(a.shape[0]):
            a[i] += 1.0

    @numba.njit
    def no_region(a: np.ndarray) -> None:
        for i in range(a.shape[0]):
            a[i] += 1.0

    def empty() -> None:
        pass

    scratch = np.zeros(threads)
    parallel_region(scratch)
    no_region(scratch)
    blas_get = thread_budget._pools()[0][0] if thread_budget._pools() else empty
    with tempfile.TemporaryDirectory() as tmp:
        path = model_path("lenet5", Path(tmp), 1.0, None, 0)
        x = np.zeros((1, 1, 28, 28), np.float32)
        ort = OnnxRuntimeEngine().prepare(path, threads, x.shape, Path(tmp))
        probes: dict[str, Callable[[], Any]] = {
            "empty Python function call": empty,
            "OpenBLAS get_num_threads (ctypes)": blas_get,
            f"compiled call, no parallel region ({threads} numba threads)": lambda: no_region(scratch),
            f"compiled call, one parallel region over {threads} threads": lambda: parallel_region(scratch),
            "onnxruntime LeNet-5 run": lambda: ort(x),
        }
        with cpu_threads(threads):
            for probe in probes.values():
                probe()
            warm: dict[str, list[float]] = {name: [] for name in probes}
            cold: dict[str, list[float]] = {name: [] for name in probes}
            for _ in range(rounds):
                for name, probe in probes.items():
                    for pause, table in ((0.0, warm), (gap, cold)):
                        if pause:
                            time.sleep(pause)
                            ort(x)
                            time.sleep(pause)
                        else:
                            probe()
                        start = time.perf_counter()
                        probe()
                        table[name].append((time.perf_counter() - start) * 1e6)
    lines = [
        "",
        f"### Cold and warm costs ({numba.threading_layer()} threading layer, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '')})",
        "",
        "Warm: right after the same call. Cold: after a pause, an onnxruntime run and another pause.",
        "",
        "| operation | warm us | cold us |",
        "|---|---:|---:|",
    ]
    for name in probes:
        lines.append(
            f"| {name} | {statistics.median(warm[name]):.1f} | {statistics.median(cold[name]):.1f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases", default="lenet5:1,simplecnn:1,simplecnn:1:1,lenet5:8", help="model:batch[:threads],..."
    )
    parser.add_argument("--threads", type=int, default=2, help="threads of cases that do not say")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument(
        "--gap", type=float, default=0.02, help="pause before each run, s (edgecnn bench: 0.02)"
    )
    parser.add_argument(
        "--output", type=Path, default=Path(__file__).parent.parent / "docs" / "small-models.md"
    )
    parser.add_argument("--before", help="also compare with the package at this git commit")
    parser.add_argument("--processes", type=int, default=3, help="child processes per version (--before)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # child of --before: one case, JSON out
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure_case(args.measure, args.threads, args.rounds, args.gap)))
        return
    load = os.getloadavg()[0]
    lines = [
        "## Measurements",
        "",
        f"Machine: {machine_line(load)}; {args.rounds} interleaved rounds "
        f"(medians), a {args.gap * 1e3:.0f} ms pause before every run as in `edgecnn bench`.",
        "",
        f"Command: `.venv/bin/python benchmarks/small_models.py --cases {args.cases} --threads {args.threads} "
        f"--rounds {args.rounds} --gap {args.gap}" + (f" --before {args.before}`" if args.before else "`"),
        "",
        "`edgecnn` is `model(x)` (the cached fast run); `edgecnn checked` is the general path every",
        "call took before it (check_feeds, plan lookup, cpu_threads, execute), same model and plan.",
        "",
        "| model | batch | threads | edgecnn ms | edgecnn checked ms | onnxruntime ms | edgecnn / onnxruntime |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    splits = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        for case in args.cases.split(","):
            name, batch, threads = parse_case(case, args.threads)
            entry = zoo_entry(name)
            path = model_path(name, cache, 1.0, None, 0)
            shape = (batch, entry.channels, entry.resolution, entry.resolution)
            x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
            net = edgecnn.load(path, threads=threads)
            ort = OnnxRuntimeEngine().prepare(path, threads, shape, cache)
            times = interleaved(
                {"edgecnn": net, "checked": checked_path(net), "onnxruntime": ort}, x, args.rounds, args.gap
            )
            ours, old, theirs = (statistics.median(times[k]) for k in ("edgecnn", "checked", "onnxruntime"))
            lines.append(
                f"| {name} | {batch} | {threads} | {ours:.3f} | {old:.3f} | {theirs:.3f} | {ours / theirs:.2f}x |"
            )
            if not net._fast_runs:
                continue  # a batch split over threads: no single run to take apart
            title = f"{name} batch {batch}, {threads} thread(s)"
            splits.append((title, step_split(net, x, ort, args.rounds, args.gap)))
    for title, rows in splits:
        lines += ["", f"### {title}: edgecnn's cold run, step by step", "", "| step | ms |", "|---|---:|"]
        lines += [f"| {label} | {ms:.3f} |" for label, ms in rows]
    lines += cold_probes(args.rounds, args.gap, args.threads)
    if args.before:
        lines += before_and_after(args, args.processes)
    lines.append(f"\nLoad average at the end: {os.getloadavg()[0]:.2f}.")
    text = "\n".join(lines) + "\n"
    print(text)
    write_between_markers(args.output, text)


BEGIN, END = "<!-- benchmarks/small_models.py: begin -->", "<!-- benchmarks/small_models.py: end -->"


def write_between_markers(path: Path, text: str) -> None:
    """Replace what lies between the markers in ``path`` (the prose around them stays), or write
    the file with the markers if it has none."""
    old = path.read_text() if path.exists() else ""
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        path.write_text(f"{head}{BEGIN}\n{text}{END}{tail}")
    else:
        path.write_text(f"{old}{BEGIN}\n{text}{END}\n")


if __name__ == "__main__":
    main()
