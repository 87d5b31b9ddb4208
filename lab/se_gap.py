"""Squeeze-and-excitation steps against onnxruntime's profiled nodes, per kind of step (issue 36).

An SE block is GlobalAveragePool -> 1x1 conv (squeeze, with its activation) -> 1x1 conv (excite)
-> gate activation -> Mul of the feature map by the gate. For each zoo model and batch, edgecnn's
steps are timed inside whole runs (common.time_steps) and onnxruntime's nodes by its profiler, the
two engines' runs alternating in one process; each SE step's onnxruntime time is that of the nodes
computing the same thing (the conv's BatchNormalization and activation nodes included, as
depthwise_gap.activation_chains finds them). A batch that runs as slices side by side has each
slice's steps timed on its thread (CPU time: that thread's). Listed per model and batch: the summed median ms of
each kind (pool, squeeze, excite + gate activation, gate Mul), the ratio, and the kernels edgecnn
chose.

With ``--kernels``, instead: each conv layer the plan runs on the GEMV kernel (the squeeze and
excite layers) against the kernel the rules would give it without that one, prepared side by
side in this process and called in alternation on one thread, timed in process CPU time (figures
that hold up on a loaded machine); per model and batch, the summed and per-layer medians.

    .venv/bin/python lab/se_gap.py --models efficientnet-b0,mobilenetv3-large --batches 1,8 --rounds 20
    .venv/bin/python lab/se_gap.py --kernels --batches 1,8 --rounds 30
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from common import conv_layers, load_model, machine_line, model_input, time_steps
from depthwise_gap import activation_chains, alternate_with_ort, ort_time
from edgecnn.bench.zoo import build_model

CALLS = 20
"""Calls per timed sample in ``--kernels`` (a call takes microseconds)."""

KINDS = ("pool", "squeeze", "excite+act", "gate act", "gate mul")


def _is_unit_map(plan: Any, name: str) -> bool:
    t = plan.types.get(name) if name else None
    return t is not None and len(t.shape) == 4 and tuple(t.shape[2:]) == (1, 1)


def se_kinds(plan: Any) -> dict[str, str]:
    """{step's node name: SE kind}: a Mul with one operand of 1x1 maps is a gate; walking back from
    that operand, the steps before the first conv are the gate's activation, that conv the excite
    (its fused activation included), the steps after it the squeeze, down to the pool."""
    producer = {out: step.node for step in plan.steps for out in step.node.outputs}
    kinds: dict[str, str] = {}
    for step in plan.steps:
        node = step.node
        gates = [i for i in node.inputs if _is_unit_map(plan, i)]
        if node.op != "Mul" or len(gates) != 1:
            continue
        kinds[node.name] = "gate mul"
        kind, source = "gate act", producer.get(gates[0])
        while source is not None and source.name not in kinds:
            if "Pool" in source.op:
                kinds[source.name] = "pool"
                break
            if kind == "gate act" and ("Conv" in source.op or source.op == "Gemm"):
                kind = "excite+act"
            kinds[source.name] = kind
            if kind == "excite+act":
                kind = "squeeze"
            source = next((producer[i] for i in source.inputs if i in producer), None)
    return kinds


def time_slices(plan: Any, samples: dict[str, list[tuple[float, float]]]) -> None:
    """Wraps the steps of a split batch's slice plans as common.time_steps wraps a plan's: each
    slice's step is timed on its own thread, while the other slices run theirs."""

    def timed(run: Any, label: str) -> Any:
        def call(*arguments: Any) -> Any:
            wall, cpu = time.perf_counter(), time.thread_time()
            result = run(*arguments)
            samples.setdefault(label, []).append((time.perf_counter() - wall, time.thread_time() - cpu))
            return result

        return call

    for part in plan.split.plans.values():
        part.memory.entries = tuple(
            (e[0], timed(e[1], f"{e[-1].node.name} ({e[-1].kernel.name})"), *e[2:])
            for e in part.memory.entries
        )


def measure(
    model_name: str, batch: int, threads: int, rounds: int
) -> dict[str, tuple[float, float, float, str]]:
    """{kind: (edgecnn wall ms, edgecnn CPU ms, onnxruntime ms, edgecnn's kernels)}, summed medians."""
    model = build_model(model_name)
    name, x1 = model_input(model)
    x = np.repeat(x1, batch, axis=0)
    net = load_model(model, threads)
    net(x)
    plan = net.plan_for(x)
    steps = time_steps(net)
    if plan.split is not None:  # the batch runs as slices side by side: time their steps
        time_slices(plan, steps)
    ort_ms = alternate_with_ort(model, net, steps, name, x, threads, rounds)
    wall = {label.split(" (")[0]: statistics.median(w for w, _ in v) * 1e3 for label, v in steps.items()}
    cpu = {label.split(" (")[0]: statistics.median(c for _, c in v) * 1e3 for label, v in steps.items()}
    chains = activation_chains(model)
    kinds = se_kinds(plan)
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    kernels: dict[str, Counter[str]] = defaultdict(Counter)
    for step in plan.steps:
        kind = kinds.get(step.node.name)
        if kind is None:
            continue
        totals[kind][0] += wall.get(step.node.name, 0.0)
        totals[kind][1] += cpu.get(step.node.name, 0.0)
        totals[kind][2] += ort_time(chains.get(step.node.name, [step.node.name]), ort_ms)
        kernels[kind][step.kernel.name] += 1
    return {k: (*v, ", ".join(f"{n} x{c}" for n, c in kernels[k].most_common())) for k, v in totals.items()}  # type: ignore[misc]


def kernel_ab(model_name: str, batch: int, rounds: int) -> list[tuple[str, str, float, float]]:
    """(layer shape, displaced kernel, its CPU us, the GEMV kernel's CPU us) per layer on the GEMV
    kernel: medians of ``rounds`` alternating samples of CALLS calls on one thread."""
    from edgecnn.kernels.cpu import cpu_threads
    from edgecnn.kernels.registry import candidate_kernels
    from edgecnn.kernels.tuning_measure import example_inputs, heuristic_choice

    model = build_model(model_name)
    _, x1 = model_input(model)
    x = np.repeat(x1, batch, axis=0)
    rows = []
    for node, types, values, chosen in conv_layers(load_model(model, 1), x):
        if chosen != "gemv":
            continue
        entries = candidate_kernels(node, types, values)
        other = heuristic_choice([e for e in entries if e.name != "gemv"], node, types, values)
        kernels = {e.name: e.factory(node, types, values) for e in entries if e.name in (other, "gemv")}
        inputs = example_inputs(types, values)
        out = np.empty(kernels["gemv"].out_shape, np.float32)
        samples: dict[str, list[float]] = defaultdict(list)
        with cpu_threads(1):
            for _ in range(rounds + 1):  # the first round warms up
                for name, kernel in kernels.items():
                    start = time.process_time()
                    for _ in range(CALLS):
                        kernel.run_into(out, *inputs)
                    samples[name].append((time.process_time() - start) / CALLS * 1e6)
        shape = f"{types[0].dims[1]}->{types[1].dims[0]}"
        median = {name: statistics.median(v[1:]) for name, v in samples.items()}
        rows.append((shape, other, median[other], median["gemv"]))
    return rows


def print_kernel_ab(model_name: str, batch: int, rounds: int) -> None:
    rows = kernel_ab(model_name, batch, rounds)
    before, after = sum(r[2] for r in rows), sum(r[3] for r in rows)
    displaced = Counter(r[1] for r in rows)
    print(f"\n#### {model_name}, batch {batch}: {len(rows)} layers on gemv (CPU us, 1 thread, medians)\n")
    print("| layers | before (kernel) | gemv | ratio |")
    print("|---|---:|---:|---:|")
    for shape, other, t_other, t_gemv in rows:
        print(f"| {shape} | {t_other:.1f} ({other}) | {t_gemv:.1f} | {t_gemv / t_other:.2f} |")
    kernels = ", ".join(f"{n} x{c}" for n, c in displaced.most_common())
    print(f"| all ({kernels}) | {before:.1f} | {after:.1f} | {after / before:.2f} |")
    print(f"| per layer | {before / len(rows):.1f} | {after / len(rows):.1f} | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="efficientnet-b0,mobilenetv3-large,pp-lcnet,regnety-400mf")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--kernels", action="store_true", help="GEMV layers against the displaced kernel")
    args = parser.parse_args()
    print(machine_line(args.threads))
    for model_name in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            if args.kernels:
                print_kernel_ab(model_name, batch, args.rounds)
                continue
            totals = measure(model_name, batch, args.threads, args.rounds)
            print(
                f"\n#### {model_name}, batch {batch} (summed medians of {args.rounds} alternating runs, ms)\n"
            )
            print("| SE step | edgecnn wall | edgecnn CPU | onnxruntime | ratio (wall) | edgecnn kernels |")
            print("|---|---:|---:|---:|---:|---|")
            for kind in KINDS:
                if kind in totals:
                    w, c, o, names = totals[kind]
                    print(
                        f"| {kind} | {w:.3f} | {c:.3f} | {o:.3f} | {w / o if o else float('nan'):.2f} | {names} |"
                    )
    print("\n" + machine_line(args.threads))


if __name__ == "__main__":
    main()
