"""Depthwise convolutions and squeeze-and-excitation steps against onnxruntime, layer by layer
(issue 36).

For each zoo model (batch 1, seeded weights), edgecnn's steps are timed inside whole runs
(common.time_steps) and onnxruntime's nodes by its own profiler, the two engines' runs alternating
in one process. Listed: every depthwise step (channels, kernel, stride, output size, activation)
beside the onnxruntime nodes that compute the same thing (the Conv and the BatchNormalization and
activation nodes that only read the chain: SiLU's Sigmoid and Mul included, each name with or
without its layout transformer's ``_nchwc`` suffix), then the squeeze-and-excitation steps
(GlobalAveragePool, the gate Mul) summed per kind.

    .venv/bin/python lab/depthwise_gap.py --models efficientnet-b0,mobilenetv3-large,pp-lcnet --rounds 30

With ``--kernels depthwise,depthwise_lanes`` it instead times each depthwise layer alone on every
listed kernel that can run it: process CPU time on one thread, the kernels' calls interleaved
(``--calls`` per sample, medians of ``--rounds``), outputs checked equal to the first kernel's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from common import conv_layers, load_model, machine_line, model_input, ort_options, time_steps
from edgecnn.bench.zoo import build_model
from edgecnn.kernels.cpu.conv.setup import conv_setup

ACTIVATION_OPS = ("BatchNormalization", "Relu", "Clip", "HardSwish", "Sigmoid", "HardSigmoid", "Mul")


def activation_chains(model: onnx.ModelProto) -> dict[str, list[str]]:
    """For each Conv, its name and those of the nodes that read only the chain's outputs and
    constants (its BatchNormalization and activation, SiLU's Sigmoid and Mul both)."""
    constants = {init.name for init in model.graph.initializer}
    consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in model.graph.node:
        for value in node.input:
            consumers[value].append(node)
    chains = {}
    for node in model.graph.node:
        if node.op_type != "Conv":
            continue
        chain, outputs, frontier = [node.name], set(node.output), list(node.output)
        while frontier:
            for reader in consumers[frontier.pop()]:
                inside = all(v in outputs or v in constants or not v for v in reader.input)
                if reader.op_type in ACTIVATION_OPS and inside and reader.name not in chain:
                    chain.append(reader.name)
                    outputs.update(reader.output)
                    frontier.extend(reader.output)
        chains[node.name] = chain
    return chains


ORT_SUFFIXES = ("", "_nchwc", "/QuickGeluFusion/")
"""onnxruntime's names for an ONNX node: its own, after the NCHWc layout pass, and (for SiLU's Mul)
the QuickGelu node its Sigmoid and Mul are fused into."""


def ort_time(names: list[str], times: dict[str, float]) -> float:
    """The summed median ms of the onnxruntime nodes among ``names`` (under any ORT_SUFFIXES)."""
    return sum(times.get(n + suffix, 0.0) for n in names for suffix in ORT_SUFFIXES)


def alternate_with_ort(
    model: onnx.ModelProto,
    net: Any,
    steps: dict[str, Any],
    name: str,
    x: np.ndarray,
    threads: int,
    rounds: int,
) -> dict[str, float]:
    """Runs ``net`` and a profiling onnxruntime session on ``x`` in turn (3 warm-up runs each, then
    ``rounds``; ``steps``, common.time_steps' samples, cleared after the warm-up) and returns the
    median ms of each onnxruntime node over the timed rounds."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        options = ort_options(threads)
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(tmp) / "ort")
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        for _ in range(3):
            session.run(None, {name: x})
            net(x)
        steps.clear()
        for _ in range(rounds):
            net(x)
            session.run(None, {name: x})
        events = json.loads(Path(session.end_profiling()).read_text())
    samples: dict[str, list[float]] = defaultdict(list)
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            samples[event["name"][: -len("_kernel_time")]].append(event["dur"] / 1e3)
    return {node: float(np.median(values[-rounds:])) for node, values in samples.items()}


def measure(model_name: str, threads: int, rounds: int) -> tuple[list[str], dict[str, tuple[float, float]]]:
    """The depthwise table's rows, and per kind (depthwise, pool, gate) edgecnn's and ORT's total ms."""
    model = build_model(model_name)
    name, x = model_input(model)
    net = load_model(model, threads)
    net(x)
    plan = net.plan_for(x)
    steps = time_steps(net)
    ort_ms = alternate_with_ort(model, net, steps, name, x, threads, rounds)
    ours = {label.split(" (")[0]: statistics.median(w for w, _ in v) * 1e3 for label, v in steps.items()}
    chains = activation_chains(model)
    rows: list[str] = []
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for step in plan.steps:
        node, kernel = step.node, step.kernel.name
        kind = ""
        if kernel.startswith("depthwise"):
            kind = "depthwise"
        elif node.op == "GlobalAveragePool":
            kind = "pool"
        elif node.op == "Mul" and any(
            (t := plan.types.get(i)) is not None and t.shape[2:] == (1, 1) for i in node.inputs
        ):
            kind = "gate"
        if not kind:
            continue
        theirs = ort_time(chains.get(node.name, [node.name]), ort_ms)
        totals[kind][0] += ours.get(node.name, 0.0)
        totals[kind][1] += theirs
        if kind == "depthwise":
            types = [plan.types.get(i) if i else None for i in node.inputs]
            s = conv_setup(node, types)
            assert s is not None
            act = getattr(node.attrs, "activation", "") or "-"
            mine = ours.get(node.name, 0.0)
            rows.append(
                f"| {node.name} | {s.out_channels} | {s.kernel[0]}x{s.kernel[1]}/{s.strides[0]} | "
                f"{s.out[0]}x{s.out[1]} | {act} | {mine:.3f} | {theirs:.3f} | "
                f"{mine / theirs if theirs else float('nan'):.2f} |"
            )
    return rows, {k: (v[0], v[1]) for k, v in totals.items()}


def kernel_ab(model_name: str, kernels: list[str], calls: int, rounds: int) -> list[str]:
    """Rows of per-layer CPU ms (one thread) of each of ``kernels`` on the model's depthwise layers."""
    import time

    from edgecnn.kernels.cpu import cpu_threads
    from edgecnn.kernels.registry import candidate_kernels
    from edgecnn.kernels.tuning_measure import example_inputs

    model = build_model(model_name)
    _, x = model_input(model)
    rows = []
    for node, types, values, chosen in conv_layers(load_model(model, 1), x):
        if not chosen.startswith("depthwise"):
            continue
        entries = {e.name: e for e in candidate_kernels(node, types, values) if e.name in kernels}
        steps: dict[str, Any] = {n: entries[n].factory(node, types, values) for n in kernels if n in entries}
        inputs = example_inputs(types, values)
        outputs = {name: np.empty(step.out_shape, np.float32) for name, step in steps.items()}
        samples: dict[str, list[float]] = defaultdict(list)
        with cpu_threads(1):
            for name, step in steps.items():
                step.run_into(outputs[name], *inputs)
            for _ in range(rounds):
                for name, step in steps.items():
                    start = time.process_time()
                    for _ in range(calls):
                        step.run_into(outputs[name], *inputs)
                    samples[name].append((time.process_time() - start) / calls * 1e3)
        first = outputs[next(iter(steps))]
        agree = all(np.allclose(o, first, rtol=1e-4, atol=1e-4) for o in outputs.values())
        s = conv_setup(node, types)
        assert s is not None
        act = getattr(node.attrs, "activation", "") or "-"
        times = " | ".join(f"{statistics.median(samples[k]):.4f}" if k in samples else "-" for k in kernels)
        rows.append(
            f"| {node.name} | {s.out_channels} | {s.kernel[0]}x{s.kernel[1]}/{s.strides[0]} | "
            f"{s.out[0]}x{s.out[1]} | {act} | {chosen} | {times} | {'yes' if agree else 'NO'} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="efficientnet-b0,mobilenetv3-large,pp-lcnet")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--summary", action="store_true", help="only the totals per kind")
    parser.add_argument("--kernels", default="", help="comma-separated depthwise kernels to time alone")
    parser.add_argument("--calls", type=int, default=20, help="calls per sample with --kernels")
    args = parser.parse_args()
    if args.kernels:
        kernels = args.kernels.split(",")
        print(machine_line(1))
        for model_name in args.models.split(","):
            print(f"\n#### {model_name} (CPU ms per call, 1 thread, medians of {args.rounds})\n")
            print(
                f"| layer | channels | kernel/stride | output | activation | chosen | {' | '.join(kernels)} | same |"
            )
            print("|---|---:|---|---|---|---|" + "---:|" * len(kernels) + "---|")
            print("\n".join(kernel_ab(model_name, kernels, args.calls, args.rounds)))
        print("\n" + machine_line(1))
        return
    print(machine_line(args.threads))
    for model_name in args.models.split(","):
        rows, totals = measure(model_name, args.threads, args.rounds)
        print(f"\n#### {model_name} (medians of {args.rounds} alternating runs, ms)\n")
        if not args.summary:
            print(
                "| layer | channels | kernel/stride | output | activation | edgecnn | onnxruntime | ratio |"
            )
            print("|---|---:|---|---|---|---:|---:|---:|")
            print("\n".join(rows))
            print()
        print("| steps | edgecnn | onnxruntime | ratio |\n|---|---:|---:|---:|")
        for kind, (mine, theirs) in sorted(totals.items()):
            print(f"| {kind} | {mine:.2f} | {theirs:.2f} | {mine / theirs if theirs else float('nan'):.2f} |")
    print("\n" + machine_line(args.threads))


if __name__ == "__main__":
    main()
