"""What the direct convolution (conv_direct.py, kernel ``direct_gemm``) saves against im2col + BLAS
(issue 4): each layer the heuristic gives it, timed with both kernels, then whole zoo models planned
with and without the rule (``conv.MAX_DIRECT_DEPTH = 0``), run interleaved in one process.

Writes the section between the ``direct`` markers of docs/conv-gap.md (or prints with --print-only).

    .venv/bin/python benchmarks/direct_conv.py --models simplecnn,lenet5,alexnet,squeezenet1.1,resnet18,resnet50 --threads 2
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from conv_gap import _input, _load, replace_section

import edgecnn
from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model
from edgecnn.kernels.cpu.conv import steps as conv_kernels
from edgecnn.kernels.cpu.conv.direct import DirectConv
from edgecnn.kernels.cpu.conv.steps import TiledConvGemm
from edgecnn.kernels.cpu.system.threads import cpu_threads

DOC = Path(__file__).resolve().parents[1] / "docs" / "conv-gap.md"
COMMAND = ".venv/bin/python benchmarks/direct_conv.py"


def interleaved(runs: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """ms of each callable per round, the order turned every round, after one warm-up call each."""
    for run in runs.values():
        run()
    names = list(runs)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        for k in range(len(names)):
            name = names[(round_ + k) % len(names)]
            start = time.perf_counter()
            runs[name]()
            times[name].append((time.perf_counter() - start) * 1e3)
    return times


def _plan(model: onnx.ModelProto, feeds: dict[str, np.ndarray], threads: int, direct: bool) -> edgecnn.Model:
    saved = conv_kernels.MAX_DIRECT_DEPTH
    conv_kernels.MAX_DIRECT_DEPTH = saved if direct else 0
    try:
        net = _load(model, threads)
        net.run(feeds)  # the plan (and its kernel choices) is built here, under the setting
        return net
    finally:
        conv_kernels.MAX_DIRECT_DEPTH = saved


def layer_rows(
    name: str, net: edgecnn.Model, feeds: dict[str, np.ndarray], threads: int, rounds: int
) -> list[str]:
    """One row per direct_gemm step: its time with each kernel (medians of interleaved calls)."""
    plan = net.plan_for(feeds)
    rows = []
    for step in plan.steps:
        if step.kernel.name != "direct_gemm":
            continue
        node = step.node
        types = [plan.types.get(i) if i else None for i in node.inputs]
        values = [plan.constants.get(i) if i else None for i in node.inputs]
        x = np.random.default_rng(1).standard_normal(types[0].shape).astype(np.float32)
        kernels = {"direct": DirectConv(node, types, values), "im2col": TiledConvGemm(node, types, values)}
        outs = {k: np.empty(kernel.out_shape, np.float32) for k, kernel in kernels.items()}

        def timed(kernel: object, out: np.ndarray, x: np.ndarray = x) -> Callable[[], None]:
            def run() -> None:
                with cpu_threads(threads):
                    kernel.run_into(out, x)  # type: ignore[attr-defined]

            return run

        times = interleaved({k: timed(kernels[k], outs[k]) for k in kernels}, rounds)
        np.testing.assert_allclose(outs["direct"], outs["im2col"], rtol=1e-3, atol=1e-3)
        s = kernels["direct"].setup
        shape = f"{s.in_channels}->{s.out_channels} {s.kernel[0]}x{s.kernel[1]}/{s.strides[0]} @{s.out[0]}x{s.out[1]}"
        direct, im2col = (float(np.median(times[k])) for k in ("direct", "im2col"))
        rows.append(
            f"| {name} | {node.name} | {shape} | {im2col:.3f} | {direct:.3f} | {direct / im2col:.2f} |"
        )
    return rows


def whole_row(
    name: str,
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    nets: dict[str, edgecnn.Model],
    rounds: int,
) -> str:
    times = interleaved({k: (lambda net=net: net.run(feeds)) for k, net in nets.items()}, rounds)
    before, after = (float(np.median(times[k])) for k in ("im2col", "direct"))
    low_before, low_after = (min(times[k]) for k in ("im2col", "direct"))
    return (
        f"| {name} | {before:.2f} | {after:.2f} | {after / before:.2f} | {low_before:.2f} | {low_after:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="simplecnn,lenet5,alexnet,squeezenet1.1,resnet18,resnet50")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=30, help="interleaved rounds, whole models")
    parser.add_argument("--layer-rounds", type=int, default=50)
    parser.add_argument("--print-only", action="store_true")
    args = parser.parse_args()
    layers, wholes = [], []
    load = os.getloadavg()[0]
    for name in args.models.split(","):
        model = build_model(name)
        feeds = dict([_input(model)])
        nets = {
            "im2col": _plan(model, feeds, args.threads, False),
            "direct": _plan(model, feeds, args.threads, True),
        }
        layers += layer_rows(name, nets["direct"], feeds, args.threads, args.layer_rounds)
        wholes.append(whole_row(name, model, feeds, nets, args.rounds))
    lines = [
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; batch 1, {args.threads} thread(s).",
        "",
        f"Command: `{COMMAND} --models {args.models} --threads {args.threads} --rounds {args.rounds} "
        f"--layer-rounds {args.layer_rounds}`",
        "",
        f"Each layer the rule gives to `direct_gemm`, alone (medians of {args.layer_rounds} interleaved calls, ms):",
        "",
        "| model | layer | shape | im2col + BLAS | direct | direct / im2col |",
        "|---|---|---|---:|---:|---:|",
        *layers,
        "",
        f"Whole models planned without and with the rule (ms, {args.rounds} interleaved runs):",
        "",
        "| model | without: median | with: median | with / without | without: min | with: min |",
        "|---|---:|---:|---:|---:|---:|",
        *wholes,
    ]
    print("\n".join(lines))
    if not args.print_only:
        DOC.write_text(replace_section(DOC.read_text(), "direct", lines))


if __name__ == "__main__":
    main()
