"""The in-place 1x1 kernel (kernels/cpu/conv/pointwise.py) against the BLAS tiles it replaces.

Layers: every ungrouped, unpadded 1x1 stride-1 layer of the zoo models (batch 1), each distinct
shape once, with the kernel the heuristic chose; its time on this kernel, the BLAS tiles'
(``gemm_1x1``) and the packed-weight GEMM's, as `edgecnn tune` prepares them, interleaved with the
order turned every round (medians).

Whole models: each model planned twice in one process, with the heuristic as it is and with
``conv.READ_IN_PLACE = False`` (every 1x1 layer back on the BLAS tiles, residual sums in their own pass),
and an onnxruntime session beside them; runs alternate with the order turned every round
(medians); outputs are checked equal. Both tables go into docs/conv-gap.md between their markers.

    .venv/bin/python benchmarks/pointwise.py --threads 2 --rounds 40
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from conv_gap import _input, _load, conv_layers, layer_timers
from rule_ab import prepared_runs, rotated_times
from sections import replace_section

from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model
from edgecnn.kernels.cpu.conv import steps as conv

DOC = Path(__file__).parent.parent / "docs" / "conv-gap.md"
KERNELS = ("pointwise", "gemm_1x1", "packed_gemm")


def layer_rows(models: list[str], threads: int, rounds: int) -> list[str]:
    rows, seen = [], set()
    for model_name in models:
        model = build_model(model_name)
        _, x = _input(model)
        for node, types, values, chosen in conv_layers(_load(model, threads), x):
            if not conv.can_read_in_place(node, types, values):
                continue
            timers, _, shape, gflop = layer_timers(node, types, values, threads)
            if shape in seen:
                continue
            seen.add(shape)
            measured = rotated_times({k: timers[k] for k in KERNELS if k in timers}, rounds)
            times = {k: wall for k, (wall, _) in measured.items()}
            cells = " | ".join(f"{times[k]:.3f}" if k in times else "-" for k in KERNELS)
            ratio = times["pointwise"] / times["gemm_1x1"] if "gemm_1x1" in times else float("nan")
            rows.append(f"| {model_name} | {shape} | {gflop * 1e3:.1f} | {chosen} | {cells} | {ratio:.2f} |")
            print(rows[-1], flush=True)
    return rows


def whole_row(model_name: str, threads: int, rounds: int) -> str:
    """One table row: the model before (``conv.READ_IN_PLACE = False``) and after, and onnxruntime,
    runs alternating (rule_ab.py)."""
    times = rotated_times(
        prepared_runs(model_name, threads, [("edgecnn.kernels.cpu.conv.steps", "READ_IN_PLACE", False)]),
        rounds,
    )
    before, after, ort = times["old"][0], times["new"][0], times["onnxruntime"][0]
    return (
        f"| {model_name} | {before:.2f} | {after:.2f} | {after / before:.2f} | "
        f"{ort:.2f} | {before / ort:.2f} | {after / ort:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="squeezenet1.1,mobilenetv2,shufflenetv2,resnet50,googlenet")
    parser.add_argument(
        "--whole", default="squeezenet1.1,mobilenetv2,shufflenetv2,resnet50,resnet18,googlenet"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--output", type=Path, default=DOC)
    args = parser.parse_args()
    command = (
        f"`.venv/bin/python benchmarks/pointwise.py --models {shlex.quote(args.models)} "
        f"--whole {shlex.quote(args.whole)} --threads {args.threads} --rounds {args.rounds}`"
    )
    load = os.getloadavg()[0]
    layers = layer_rows(args.models.split(","), args.threads, args.rounds) if args.models else []
    whole = []
    for model_name in args.whole.split(",") if args.whole else []:
        whole.append(whole_row(model_name, args.threads, args.rounds))
        print(whole[-1], flush=True)
    machine = (
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; batch 1, {args.threads} thread(s), medians of {args.rounds} rounds."
    )
    text = args.output.read_text()
    if layers:
        text = replace_section(
            text,
            "conv-gap:pointwise-layers",
            [
                machine,
                "",
                f"Command: {command}",
                "",
                "| model | layer | MFLOP | chosen | pointwise ms | gemm_1x1 ms | packed_gemm ms | pointwise / gemm_1x1 |",
                "|---|---|---:|---|---:|---:|---:|---:|",
                *layers,
            ],
        )
    if whole:
        text = replace_section(
            text,
            "conv-gap:pointwise-whole",
            [
                machine,
                "",
                f"Command: {command}",
                "",
                "Before: every 1x1 layer on the BLAS tiles (`conv.READ_IN_PLACE = False`); after: the heuristic as it is.",
                "",
                "| model | before ms | after ms | after / before | onnxruntime ms | before / ORT | after / ORT |",
                "|---|---:|---:|---:|---:|---:|---:|",
                *whole,
            ],
        )
    args.output.write_text(text)


if __name__ == "__main__":
    main()
