"""Whole models at another git revision against this tree's, in alternating child processes, with
the time of every step.

Kernels compile their helpers inline, so two revisions cannot share one process; here child
processes alternate instead, each importing ``src`` of one version (REV's from ``git archive``). A
child loads each model (edgecnn.bench.zoo, seeded weights, batch 1), runs it ``--warmup`` times,
then ``--rounds`` times with ``--gap-ms`` of sleep before each run, timing the run and each of its
steps (common.time_steps); with ``--int8`` each model is first quantised by edgecnn's own int8
quantizer (``compress --quantize int8 --calibration``'s), calibrated on four seeded inputs. The tables give, per version, the median over the processes of
each child's medians: whole runs, then the steps that moved most. A layer's time inside the model
is what a kernel change is for; timed alone (layer_ab.py) its weights and input stay in cache.

    .venv/bin/python lab/model_ab.py --before HEAD --models resnet50 --processes 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from common import load_model, model_input, package_sources, run_child, time_steps
from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model

Medians = dict[str, dict[str, float]]  # model: {"run": ms, "layer (kernel)": ms, ...}


def int8_model(model: Any, shape: tuple[int, ...], threads: int) -> Any:
    """``model`` quantised by edgecnn's quantize_int8, calibrated on four seeded inputs of ``shape``,
    loaded from its .ecnn with ``threads`` threads."""
    import onnx

    import edgecnn
    from edgecnn.compress.int8 import quantize_int8
    from edgecnn.format import save_ecnn
    from edgecnn.importers import load_graph

    rng = np.random.default_rng(1)
    samples = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save(model, f"{tmp}/float.onnx")
        save_ecnn(quantize_int8(load_graph(f"{tmp}/float.onnx"), samples), f"{tmp}/int8.ecnn")
        return edgecnn.load(f"{tmp}/int8.ecnn", threads=threads)


def measure(models: list[str], threads: int, warmup: int, rounds: int, gap_ms: float, int8: bool) -> Medians:
    """Median ms of each model's runs and of each of its steps, in this process."""
    results: Medians = {}
    for name in models:
        model = build_model(name)
        _, x = model_input(model)
        net = int8_model(model, x.shape, threads) if int8 else load_model(model, threads)
        for _ in range(warmup):
            net(x)
        steps = time_steps(net)
        runs = []
        for _ in range(rounds):
            if gap_ms:
                time.sleep(gap_ms / 1e3)
            start = time.perf_counter()
            net(x)
            runs.append(time.perf_counter() - start)
        medians = {label: statistics.median(w for w, _ in values) * 1e3 for label, values in steps.items()}
        results[name] = {"run": statistics.median(runs) * 1e3, **medians}
    return results


def across(samples: list[Medians], model: str, label: str) -> float:
    """The median over the processes of one version (a step absent from a version counts as 0)."""
    return statistics.median(run[model].get(label, 0.0) for run in samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="REV", required=True)
    parser.add_argument("--models", default="resnet50")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--processes", type=int, default=3, help="child processes per version")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--gap-ms", type=float, default=0.0, help="sleep before each run")
    parser.add_argument("--int8", action="store_true", help="quantise each model with quantize_int8 first")
    parser.add_argument("--top", type=int, default=12, help="steps listed per model (largest change first)")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    models = args.models.split(",")
    if args.measure:
        print(json.dumps(measure(models, args.threads, args.warmup, args.rounds, args.gap_ms, args.int8)))
        return
    load = os.getloadavg()[0]
    samples: dict[str, list[Medians]] = {"before": [], "after": []}
    options = ["--models", args.models, "--threads", str(args.threads), "--warmup", str(args.warmup)]
    options += ["--rounds", str(args.rounds), "--gap-ms", str(args.gap_ms)] + (
        ["--int8"] if args.int8 else []
    )
    with tempfile.TemporaryDirectory() as tmp:
        sources = package_sources(args.before, Path(tmp))
        for _ in range(args.processes):
            for version, source in sources.items():
                command = [sys.executable, __file__, "--measure", "--before", args.before, *options]
                samples[version].append(run_child(source, command))  # type: ignore[arg-type]
    print(
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; batch 1, {args.threads} threads, {args.gap_ms:g} ms before "
        f"each run; {args.processes} processes per version, alternating, each the median of {args.rounds} "
        "runs; medians over the processes."
    )
    print()
    print(
        f"Command: `.venv/bin/python lab/model_ab.py --before {args.before} --models {args.models} "
        f"--threads {args.threads} --processes {args.processes} --rounds {args.rounds} --gap-ms {args.gap_ms:g}"
        f"{' --int8' if args.int8 else ''}`"
    )
    for model in models:
        before, after = samples["before"], samples["after"]
        labels = set(before[0][model]) | set(after[0][model])
        labels.discard("run")
        change = {label: across(after, model, label) - across(before, model, label) for label in labels}
        print()
        print(f"{model}: {args.before} {across(before, model, 'run'):.2f} ms, this tree "
              f"{across(after, model, 'run'):.2f} ms, ratio "
              f"{across(after, model, 'run') / across(before, model, 'run'):.3f}")  # fmt: skip
        print()
        print(f"| step (kernel) | {args.before} ms | this tree ms | change ms |")
        print("|---|---:|---:|---:|")
        for label in sorted(labels, key=lambda k: -abs(change[k]))[: args.top]:
            print(
                f"| {label} | {across(before, model, label):.3f} | {across(after, model, label):.3f} "
                f"| {change[label]:+.3f} |"
            )


if __name__ == "__main__":
    main()
