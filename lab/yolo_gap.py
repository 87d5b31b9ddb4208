"""YOLOv8n's steps against onnxruntime's profiled nodes, per (op, kernel) and per layer (issue 36).

The zoo's YOLOv8n-style detector is run by edgecnn (steps timed inside whole runs,
common.time_steps, process CPU time) and by a profiling onnxruntime session, alternating in one
process (depthwise_gap.alternate_with_ort). Each edgecnn step is matched to the onnxruntime nodes
computing the same thing (a conv's BatchNormalization and SiLU nodes included; a step fused from
several nodes is matched by its node name). With 1 thread the CPU time of a step is its cost; the
tables give the summed median ms per (op, kernel) and the layers with the largest excess.

    .venv/bin/python lab/yolo_gap.py --threads 1 --rounds 20
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from common import load_model, machine_line, model_input, time_steps
from depthwise_gap import activation_chains, alternate_with_ort, ort_time
from edgecnn.bench.zoo import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="yolov8n")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    print(machine_line(args.threads))
    model = build_model(args.model)
    name, x = model_input(model)
    net = load_model(model, args.threads)
    net(x)
    plan = net.plan_for(x)
    steps = time_steps(net)
    ort_ms = alternate_with_ort(model, net, steps, name, x, args.threads, args.rounds)
    ours = {label.split(" (")[0]: statistics.median(c for _, c in v) * 1e3 for label, v in steps.items()}
    chains = activation_chains(model)
    matched: set[str] = set()
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])  # type: ignore[arg-type]
    layers = []
    for step in plan.steps:
        node, kernel = step.node, step.kernel.name
        names = chains.get(node.name, [node.name])
        matched.update(names)
        theirs = ort_time(names, ort_ms)
        mine = ours.get(node.name, 0.0)
        out = plan.types.get(node.outputs[0]) if node.outputs else None
        key = f"{node.op} ({kernel})"
        totals[key][0] += mine
        totals[key][1] += theirs
        totals[key][2] += 1
        layers.append((mine - theirs, node.name, key, tuple(out.shape) if out else (), mine, theirs))
    unmatched = defaultdict(float)
    for node_name, ms in ort_ms.items():
        base = node_name.removesuffix("_nchwc")
        if base not in matched:
            unmatched[node_name] += ms
    run_ours = sum(ours.values())
    run_theirs = sum(ort_ms.values())
    print(f"\n{args.model}: summed step medians edgecnn {run_ours:.2f} ms (CPU), onnxruntime nodes "
          f"{run_theirs:.2f} ms, ratio {run_ours / run_theirs:.2f}; medians of {args.rounds} alternating runs\n")  # fmt: skip
    print("| op (kernel) | steps | edgecnn ms | onnxruntime ms | excess ms |\n|---|---:|---:|---:|---:|")
    for key, (mine, theirs, count) in sorted(totals.items(), key=lambda kv: -(kv[1][0] - kv[1][1])):
        print(f"| {key} | {count} | {mine:.2f} | {theirs:.2f} | {mine - theirs:+.2f} |")
    print("\n| layer | op (kernel) | output | edgecnn ms | onnxruntime ms |\n|---|---|---|---:|---:|")
    for _, lname, key, shape, mine, theirs in sorted(layers, reverse=True)[: args.top]:
        print(f"| {lname} | {key} | {'x'.join(map(str, shape))} | {mine:.3f} | {theirs:.3f} |")
    if unmatched:
        print("\nonnxruntime nodes not matched to a step: "
              + ", ".join(f"{k} {v:.3f}" for k, v in sorted(unmatched.items(), key=lambda kv: -kv[1])[:10]))  # fmt: skip
    print("\n" + machine_line(args.threads))


if __name__ == "__main__":
    main()
