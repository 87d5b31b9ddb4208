"""Whole models with numba's pool spinning (kernels/cpu/threads.py, SPIN_COUNT) and without: the
edgecnn / onnxruntime ratio of interleaved runs (benchmarks/interleaved.py's ``measure``), per
spin setting, in child processes that alternate (the OpenMP runtime reads its spin count once per
process). The ratio to onnxruntime in the same rounds cancels most of this shared VM's drift between
processes; each cell is the median over the repeats. Writes the table into docs/tuning.md.

    .venv/bin/python benchmarks/spin.py --models shufflenetv2,simplecnn,squeezenet1.1,mobilenetv2,lenet5,resnet18 --repeats 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from interleaved import SPINNING, measure
from sections import replace_section

from edgecnn.bench.machine import cpu_model
from edgecnn.kernels.cpu.threads import SPIN_COUNT

DOC = Path(__file__).parent.parent / "docs" / "tuning.md"


def child(models: list[str], threads: int, rounds: int, ort_spinning: str) -> None:
    ratios = {}
    for name in models:
        ours, theirs = measure(name, threads, rounds, ort_spinning)
        ratios[name] = ours / theirs
    print(json.dumps(ratios))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", default="shufflenetv2,simplecnn,squeezenet1.1,mobilenetv2,lenet5,resnet18"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--spins", default=f"0,3000,{SPIN_COUNT}", help="GOMP_SPINCOUNT values")
    parser.add_argument("--ort-spinning", choices=list(SPINNING), default="in-run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, default=DOC)
    args = parser.parse_args()
    models = args.models.split(",")
    if args.child:
        child(models, args.threads, args.rounds, args.ort_spinning)
        return
    spins = args.spins.split(",")
    load = os.getloadavg()[0]
    results: dict[str, list[dict[str, float]]] = {spin: [] for spin in spins}
    for repeat in range(args.repeats):
        for spin in spins:
            env = dict(os.environ, GOMP_SPINCOUNT=spin)
            command = [sys.executable, __file__, "--child", "--models", args.models, "--threads", str(args.threads),
                       "--rounds", str(args.rounds), "--ort-spinning", args.ort_spinning]  # fmt: skip
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
            results[spin].append(json.loads(out.strip().splitlines()[-1]))
            print(f"repeat {repeat + 1}, GOMP_SPINCOUNT={spin}: {results[spin][-1]}", flush=True)
    lines = [
        "### Whole models by spin count",
        "",
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; batch 1, {args.threads} threads; onnxruntime spinning "
        f"{args.ort_spinning}.",
        "",
        f"Command: `.venv/bin/python benchmarks/spin.py --models {args.models} --repeats {args.repeats} "
        f"--rounds {args.rounds} --ort-spinning {args.ort_spinning}`",
        "",
        f"edgecnn / onnxruntime, median over {args.repeats} alternating processes per setting "
        f"(each: medians of {args.rounds} interleaved rounds):",
        "",
        "| model | " + " | ".join(f"GOMP_SPINCOUNT={spin}" for spin in spins) + " |",
        "|---|" + "---:|" * len(spins),
    ]
    for name in models:
        cells = [f"{np.median([r[name] for r in results[spin]]):.2f}" for spin in spins]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    args.output.write_text(replace_section(args.output.read_text(), "tuning:spin-models", lines))


if __name__ == "__main__":
    main()
