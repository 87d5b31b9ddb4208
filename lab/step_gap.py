"""Every step of a zoo model against onnxruntime's profiled nodes, summed per kind of step (issue 36).

Like depthwise_gap.py (whose alternation and activation chains it reuses) but for all steps: each
edgecnn step's median time inside whole runs (common.time_steps; with ``--threads 1`` its process
CPU time, otherwise wall) beside the onnxruntime nodes computing the same thing (the conv's
BatchNormalization and activation nodes included). Kinds: the stem (first conv), depthwise by
kernel and stride, pointwise by output size, the SE squeeze and excite convs (1x1 maps), the
global pool, the gate Mul, other steps by op; onnxruntime's nodes matched to no step (its layout
reorders) are listed as one more kind.

    .venv/bin/python lab/step_gap.py --models efficientnet-b0 --threads 1 --rounds 15
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from typing import Any

from common import load_model, machine_line, model_input, time_steps
from depthwise_gap import ORT_SUFFIXES, activation_chains, alternate_with_ort
from edgecnn.bench.zoo import build_model
from edgecnn.kernels.cpu.conv.setup import conv_setup

CONV_OPS = ("Conv", "FusedConv", "FusedConvAdd")


def step_kind(plan: Any, step: Any, first_conv: str) -> str:
    """The kind of ``step`` for the per-kind totals."""
    node = step.node
    types = [plan.types.get(i) if i else None for i in node.inputs]
    if node.op == "Mul" and any(t is not None and tuple(t.shape[2:]) == (1, 1) for t in types):
        return "gate mul"
    if node.op not in CONV_OPS:
        return node.op
    s = conv_setup(node, types)
    if s is None:
        return "conv"
    act = getattr(node.attrs, "activation", "") or "-"
    if node.name == first_conv:
        return f"stem {s.kernel[0]}x{s.kernel[1]}/{s.strides[0]} {act}"
    if s.depthwise:
        return f"depthwise {s.kernel[0]}x{s.kernel[1]}/{s.strides[0]} {s.out[0]}x{s.out[1]} {act}"
    if s.kernel == (1, 1) and tuple(s.out) == (1, 1):
        return f"se 1x1 {act}"
    if s.kernel == (1, 1):
        return f"pointwise {s.out[0]}x{s.out[1]} {act}"
    return f"conv {s.kernel[0]}x{s.kernel[1]}"


def measure(model_name: str, threads: int, rounds: int) -> dict[str, list[float]]:
    """{kind: [edgecnn ms, onnxruntime ms, steps]} summed over the model's steps."""
    model = build_model(model_name)
    name, x = model_input(model)
    net = load_model(model, threads)
    net(x)
    plan = net.plan_for(x)
    steps = time_steps(net)
    ort_ms = alternate_with_ort(model, net, steps, name, x, threads, rounds)
    column = 1 if threads == 1 else 0
    ours = {
        label.split(" (")[0]: statistics.median(v[column] for v in vs) * 1e3 for label, vs in steps.items()
    }
    chains = activation_chains(model)
    first_conv = next(s.node.name for s in plan.steps if s.node.op in CONV_OPS)
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    matched: set[str] = set()
    for step in plan.steps:
        node = step.node
        bases = [b for part in node.name.split("+") for b in chains.get(part, [part])]
        names = [base + suffix for base in bases for suffix in ORT_SUFFIXES]
        theirs = sum(ort_ms.get(n, 0.0) for n in set(names) if n not in matched)
        matched.update(names)
        row = totals[step_kind(plan, step, first_conv)]
        row[0] += ours.get(node.name, 0.0)
        row[1] += theirs
        row[2] += 1
    rest = [n for n in ort_ms if n not in matched]
    totals["onnxruntime only: " + ", ".join(sorted(rest))] = [
        0.0,
        sum(ort_ms[n] for n in rest),
        len(rest),
    ]
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="efficientnet-b0")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(machine_line(args.threads))
    for model_name in args.models.split(","):
        totals = measure(model_name, args.threads, args.rounds)
        print(f"\n#### {model_name} (medians of {args.rounds} alternating runs, ms)\n")
        print("| kind | steps | edgecnn | onnxruntime | gap | ratio |\n|---|---:|---:|---:|---:|---:|")
        for kind, (mine, theirs, n) in sorted(totals.items(), key=lambda kv: kv[1][1] - kv[1][0]):
            ratio = mine / theirs if theirs else float("nan")
            print(f"| {kind} | {n:.0f} | {mine:.3f} | {theirs:.3f} | {mine - theirs:+.3f} | {ratio:.2f} |")
        mine = sum(v[0] for v in totals.values())
        theirs = sum(v[1] for v in totals.values())
        print(f"| total | | {mine:.3f} | {theirs:.3f} | {mine - theirs:+.3f} | {mine / theirs:.2f} |")
    print("\n" + machine_line(args.threads))


if __name__ == "__main__":
    main()
