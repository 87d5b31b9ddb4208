"""Is seed 003's radar network (150 -> conv 6x1x5 + avg pool -> conv 12x6x5 + avg pool -> FC 384->50
-> 10) within 1.5x of onnxruntime on the same network exported to ONNX, at batch 1 and 256?

Both engines run the same weights (the example's untrained network, He-initialised from seed 0; speed
does not depend on the values), at the same thread count, interleaved one call each per round so
that the shared machine's load falls on both alike. Per block of rounds: each engine's median and
best call; the block is repeated ``--blocks`` times and the spread of the ratios is the noise. On a
machine busy with other work the medians mostly measure preemption; the best calls are the ones the
other work left alone. Also prints edgecnn's steps (kernel, best time) at batch 256.

    .venv/bin/python lab/radar_speed.py [--rounds 300] [--blocks 3] [--threads 1 2]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from common import machine_line, ort_options, timed_ms, tuned
from edgecnn.ir.graph import Graph
from edgecnn.model import Model
from edgecnn.radar import untrained_network
from edgecnn.runtime.options import RuntimeOptions

RULE_OFF = "edgecnn, small-model rule off"
TARGET = 1.5
"""The issue's bound on edgecnn's time over onnxruntime's."""


def to_onnx(graph: Graph) -> Any:
    """The radar graph (Conv, AveragePool, Relu, Flatten, Gemm, Softmax) as an ONNX model, opset 17."""
    import onnx
    from onnx import helper, numpy_helper

    def attributes(op: str, attrs: Any) -> dict[str, Any]:
        if op == "Conv":
            return {"kernel_shape": list(attrs.kernel_shape), "strides": [1], "pads": [0, 0]}
        if op == "AveragePool":
            return {"kernel_shape": list(attrs.kernel_shape), "strides": list(attrs.strides)}
        if op in ("Flatten", "Softmax"):
            return {"axis": attrs.axis}
        return {}

    nodes = [
        helper.make_node(n.op, n.inputs, n.outputs, n.name, **attributes(n.op, n.attrs)) for n in graph.nodes
    ]
    (spec,) = graph.inputs
    model = helper.make_model(
        helper.make_graph(
            nodes,
            graph.name,
            [helper.make_tensor_value_info(spec.name, onnx.TensorProto.FLOAT, ["N", 1, 150])],
            [helper.make_tensor_value_info(graph.outputs[0], onnx.TensorProto.FLOAT, ["N", 10])],
            [numpy_helper.from_array(value, name) for name, value in graph.initializers.items()],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@dataclass(frozen=True)
class Calls:
    median: float
    best: float


def rounds_of(timers: dict[str, Callable[[], object]], rounds: int) -> dict[str, Calls]:
    """Median and best ms of each timer over ``rounds`` rounds of one call each (after a warm-up call)."""
    for fn in timers.values():
        fn()
    samples: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(rounds):
        for name, fn in timers.items():
            samples[name].append(timed_ms(fn))
    return {name: Calls(statistics.median(v), min(v)) for name, v in samples.items()}


def best_us(fn: Callable[[], object], calls: int = 3000) -> float:
    """The fastest of ``calls`` calls, in microseconds (after one warm-up call)."""
    fn()
    return min(timed_ms(fn) for _ in range(calls)) * 1e3


def batch_one_steps(graph: Graph) -> list[tuple[str, float]]:
    """Where a batch-1 run's time goes (1 thread, best calls): each step's kernel called alone, the
    whole Model call, and the Model call of a one-Relu graph (the cost of a run with one cheap step)."""
    from edgecnn.ir.graph import Node, TensorSpec
    from edgecnn.kernels.cpu.system.threads import cpu_threads
    from edgecnn.ops.registry import NoAttrs

    net = Model(graph, RuntimeOptions.resolve(threads=1))
    x = np.random.default_rng(1).standard_normal((1, 1, 150)).astype(np.float32)
    plan = net.plan_for({"input": x})
    values = {"input": x, **net.run({"input": x}, outputs=[s.node.outputs[0] for s in plan.steps])}
    rows = []
    budget = cpu_threads(1)  # as inside a run: BLAS held at one thread, not switched per call
    budget.__enter__()
    for step in plan.steps:
        run, source = step.kernel.run, values[step.node.inputs[0]]
        if step.node.op == "Flatten":
            continue  # a view of its input in the run (no call)
        if hasattr(run, "run_into"):
            out = np.empty_like(values[step.node.outputs[0]])
            rows.append(
                (
                    f"{step.node.name} ({step.kernel.name})",
                    best_us(lambda r=run, o=out, v=source: r.run_into(o, v)),
                )
            )
        else:
            inputs = [values.get(i) for i in step.node.inputs]
            rows.append((f"{step.node.name} ({step.kernel.name})", best_us(lambda r=run, v=inputs: r(*v))))
    budget.__exit__(None, None, None)
    rows.append(("sum of the steps", sum(t for _, t in rows)))
    rows.append(("whole Model call", best_us(lambda: net(x))))
    relu = Graph(
        [TensorSpec("input", "float32", ("N", 1, 150))],
        ["y"],
        [Node("Relu", "relu", ["input"], ["y"], NoAttrs())],
    )
    one = Model(relu, RuntimeOptions.resolve(threads=1))
    rows.append(("Model call of a one-Relu graph", best_us(lambda: one(x))))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=300, help="Interleaved rounds per block (batch 1).")
    parser.add_argument("--blocks", type=int, default=3, help="Blocks of rounds; their spread is the noise.")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps-only", action="store_true", help="Only the batch-1 time per step.")
    args = parser.parse_args()
    if args.steps_only:
        for name, micros in batch_one_steps(untrained_network(seed=0)):
            print(f"  {name:<34} {micros:7.2f}")
        return

    import onnxruntime as ort

    graph = untrained_network(seed=0)
    onnx_bytes = to_onnx(graph).SerializeToString()
    rng = np.random.default_rng(0)
    print(machine_line())
    print()
    print(
        "| threads | batch | edgecnn median ms | onnxruntime median ms | median ratio (range over blocks) "
        "| edgecnn best ms | onnxruntime best ms | best ratio (range over blocks) | max abs diff |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    profiles = []
    ruled_off: list[str] = []
    for threads in args.threads:
        net = Model(graph, RuntimeOptions.resolve(threads=threads))
        session = ort.InferenceSession(onnx_bytes, ort_options(threads), providers=["CPUExecutionProvider"])
        for batch in (1, 256):
            x = rng.standard_normal((batch, 1, 150)).astype(np.float32)
            diff = float(np.abs(net(x) - session.run(None, {"input": x})[0]).max())
            rounds = args.rounds if batch == 1 else max(args.rounds // 10, 10)
            timers = {
                "edgecnn": lambda n=net, v=x: n(v),
                "ort": lambda s=session, v=x: s.run(None, {"input": v}),
            }
            if threads > 1 and batch == 256:  # also with runtime/serial.py's small-model rule off
                every_thread = Model(graph, RuntimeOptions.resolve(threads=threads))
                with tuned(serial_model_macs=0):
                    every_thread(x)  # the plan (and the threads its runs use) is built here
                timers[RULE_OFF] = lambda n=every_thread, v=x: n(v)
            blocks = [rounds_of(timers, rounds) for _ in range(args.blocks)]
            medians = [b["edgecnn"].median / b["ort"].median for b in blocks]
            bests = [b["edgecnn"].best / b["ort"].best for b in blocks]
            middle = sorted(blocks, key=lambda b: b["edgecnn"].median / b["ort"].median)[len(blocks) // 2]
            fastest = {name: min(b[name].best for b in blocks) for name in timers}
            print(
                f"| {threads} | {batch} | {middle['edgecnn'].median:.4f} | {middle['ort'].median:.4f} | "
                f"{statistics.median(medians):.2f} ({min(medians):.2f}-{max(medians):.2f}) | "
                f"{fastest['edgecnn']:.4f} | {fastest['ort']:.4f} | "
                f"{statistics.median(bests):.2f} ({min(bests):.2f}-{max(bests):.2f}) | {diff:.1e} |"
            )
            if RULE_OFF in timers:
                off = [b[RULE_OFF].best / b["ort"].best for b in blocks]
                ruled_off.append(
                    f"{threads} threads, batch {batch}, {RULE_OFF}: best {fastest[RULE_OFF]:.4f} ms, "
                    f"best ratio {statistics.median(off):.2f} ({min(off):.2f}-{max(off):.2f})"
                )
            if batch == 256:
                profile = net.profile({"input": x}, iterations=30)
                profiles.append(
                    (threads, [(layer.name, layer.kernel, layer.min_ms) for layer in profile.layers])
                )
    print("", *ruled_off, sep="\n")
    print(f"\ntarget: edgecnn within {TARGET}x of onnxruntime")
    print("\nbatch 1, 1 thread, best of 3000 calls each (us):")
    for name, micros in batch_one_steps(graph):
        print(f"  {name:<34} {micros:7.2f}")
    for threads, layers in profiles:
        print(f"\nedgecnn steps at batch 256, {threads} thread(s) (best of 30 ms):")
        for name, kernel, best in layers:
            print(f"  {name:<12} {kernel:<10} {best:.3f}")
    print()
    print(machine_line())


if __name__ == "__main__":
    main()
