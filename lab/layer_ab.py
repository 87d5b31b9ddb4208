"""One conv layer's kernel at another git revision against this tree's, at one and two threads.

Compiled kernels inline the micro-kernel and the copies they call, so two revisions of them cannot
be imported into one process side by side. Here child processes alternate instead: each imports ``src`` of one version (REV's from
``git archive``), prepares every requested layer's kernel as `edgecnn tune` does, and times it
(medians of interleaved calls at 1 and 2 threads). The table gives the median over the processes
of each version.

    .venv/bin/python lab/layer_ab.py --before HEAD --layers squeezenet1.1:conv1,simplecnn:Conv_0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from common import conv_layers, interleaved, load_model, model_input, package_sources, run_child
from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model

REPO = Path(__file__).resolve().parents[1]
THREADS = (1, 2)


def measure(specs: list[str], rounds: int) -> dict[str, dict[str, float | str]]:
    """{layer spec: {"kernel": name, threads: median ms}} in this process, with the package it imports."""
    from edgecnn.kernels.cpu import cpu_threads
    from edgecnn.kernels.registry import candidate_kernels
    from edgecnn.kernels.tuning_measure import example_inputs

    results: dict[str, dict[str, float | str]] = {}
    for spec in specs:
        model_name, layer_name, *kernel_name = spec.split(":")
        model = build_model(model_name)
        _, x = model_input(model)
        for node, types, values, chosen in conv_layers(load_model(model, 2), x):
            if node.name != layer_name:
                continue
            name = kernel_name[0] if kernel_name else chosen
            entry = next(e for e in candidate_kernels(node, types, values) if e.name == name)
            kernel = entry.factory(node, types, values)
            inputs = example_inputs(types, values)
            out = np.empty(kernel.out_shape, np.float32)

            def timer(threads: int, kernel=kernel, out=out, inputs=inputs):
                def run() -> None:
                    with cpu_threads(threads):
                        kernel.run_into(out, *inputs)

                return run

            results[spec] = {"kernel": name, **interleaved({str(t): timer(t) for t in THREADS}, rounds)}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="REV", required=True)
    parser.add_argument(
        "--layers", required=True, help="model:layer[:kernel],... (default kernel: the chosen one)"
    )
    parser.add_argument("--processes", type=int, default=3, help="child processes per version")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    specs = args.layers.split(",")
    if args.measure:
        print(json.dumps(measure(specs, args.rounds)))
        return
    load = os.getloadavg()[0]
    samples: dict[str, list[dict[str, dict[str, float | str]]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        sources = package_sources(args.before, Path(tmp))
        for _ in range(args.processes):
            for version, source in sources.items():
                command = [
                    sys.executable,
                    __file__,
                    "--measure",
                    "--before",
                    args.before,
                    "--layers",
                    args.layers,
                ]
                command += ["--rounds", str(args.rounds)]
                samples[version].append(run_child(source, command))  # type: ignore[arg-type]
    print(
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; {args.processes} processes per version, alternating, "
        f"each the median of {args.rounds} interleaved calls per thread count; medians over the processes."
    )
    print()
    print(f"Command: `.venv/bin/python lab/layer_ab.py --before {args.before} --layers {args.layers}`")
    print()
    header = " | ".join(f"{args.before} {t}t ms | this tree {t}t ms | ratio" for t in THREADS)
    print(f"| layer (kernel) | {header} |")
    print("|---|" + "---:|---:|---:|" * len(THREADS))
    for layer in specs:
        cells = []
        for threads in THREADS:
            before = statistics.median(float(run[layer][str(threads)]) for run in samples["before"])
            after = statistics.median(float(run[layer][str(threads)]) for run in samples["after"])
            cells += [f"{before:.3f}", f"{after:.3f}", f"{after / before:.2f}"]
        print(f"| {layer} ({samples['after'][0][layer]['kernel']}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
