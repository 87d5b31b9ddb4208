"""The in-place 1x1 kernel (kernels/cpu/conv_pointwise.py) against the BLAS tiles it replaces.

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
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from conv_gap import _input, _load, conv_layers, layer_timers, ort_options
from sections import replace_section

import edgecnn
from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model
from edgecnn.kernels.cpu import conv

DOC = Path(__file__).parent.parent / "docs" / "conv-gap.md"
KERNELS = ("pointwise", "gemm_1x1", "packed_gemm")


def rotated(runs: dict[str, Callable[[], object]], rounds: int, warmup: int = 3) -> dict[str, float]:
    """Median ms of each callable, one call of each per round, the starting one turning each round."""
    names = list(runs)
    samples: dict[str, list[float]] = defaultdict(list)
    for round_ in range(warmup + rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            runs[name]()
            if round_ >= warmup:
                samples[name].append((time.perf_counter() - start) * 1e3)
    return {name: float(np.median(values)) for name, values in samples.items()}


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
            times = rotated({k: timers[k] for k in KERNELS if k in timers}, rounds)
            cells = " | ".join(f"{times[k]:.3f}" if k in times else "-" for k in KERNELS)
            ratio = times["pointwise"] / times["gemm_1x1"] if "gemm_1x1" in times else float("nan")
            rows.append(f"| {model_name} | {shape} | {gflop * 1e3:.1f} | {chosen} | {cells} | {ratio:.2f} |")
            print(rows[-1], flush=True)
    return rows


def planned(model: onnx.ModelProto, x: np.ndarray, threads: int, in_place: bool) -> edgecnn.Model:
    """The model planned with or without the in-place 1x1 kernel (kernels are chosen at planning)."""
    kept = conv.READ_IN_PLACE
    conv.READ_IN_PLACE = in_place
    try:
        net = _load(model, threads)
        net(x)
    finally:
        conv.READ_IN_PLACE = kept
    return net


def whole_row(model_name: str, threads: int, rounds: int) -> str:
    """One table row: the model before and after, and onnxruntime, runs alternating."""
    import onnxruntime as ort

    model = build_model(model_name)
    name, x = _input(model)
    after = planned(model, x, threads, True)
    before = planned(model, x, threads, False)
    expected = before(x)
    np.testing.assert_allclose(after(x), expected, rtol=1e-3, atol=1e-4 * float(np.abs(expected).max()))
    session = ort.InferenceSession(
        model.SerializeToString(), ort_options(threads), providers=["CPUExecutionProvider"]
    )
    runs = {
        "before": lambda: before(x),
        "after": lambda: after(x),
        "ort": lambda: session.run(None, {name: x}),
    }
    times = rotated(runs, rounds)
    return (
        f"| {model_name} | {times['before']:.2f} | {times['after']:.2f} | {times['after'] / times['before']:.2f} | "
        f"{times['ort']:.2f} | {times['before'] / times['ort']:.2f} | {times['after'] / times['ort']:.2f} |"
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
