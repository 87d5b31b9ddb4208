"""Where edgecnn loses time against onnxruntime, per operator type and per layer (issue 4).

Both engines run the same zoo model (seeded weights) at batch 1 and the same thread count; edgecnn's
times come from ``Model.profile`` (per step, with the chosen kernel), onnxruntime's from its own
profiler (``SessionOptions.enable_profiling``, per node). ORT fuses differently, so the per-op table
groups by operator type of the *executed* node on each side; the per-layer table lists edgecnn's
slowest steps, each beside onnxruntime's node for it where one can be matched by name. Writes docs/layer-gap.md (or --output) and prints it.

    .venv/bin/python benchmarks/layer_gap.py --models mobilenetv2,shufflenetv2 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import onnx

import edgecnn
from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model, zoo_entry


def machine_line() -> str:
    """CPU, cores and load: the numbers are only comparable on a quiet machine (load near 0)."""
    load = os.getloadavg()[0]
    shared = " (shared: other jobs were running)" if load > 0.5 else ""
    return f"{cpu_model()}, {os.cpu_count()} cores, load average {load:.2f} at start{shared}"


def _input(model: onnx.ModelProto) -> tuple[str, np.ndarray]:
    value = model.graph.input[0]
    shape = [d.dim_value or 1 for d in value.type.tensor_type.shape.dim]
    return value.name, np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def edgecnn_profile(model: onnx.ModelProto, x: np.ndarray, threads: int, iterations: int) -> dict:
    """Per-op-type and per-layer mean ms of edgecnn, plus the whole run's median without hooks."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.onnx"
        onnx.save(model, str(path))
        net = edgecnn.load(str(path), threads=threads)
    profile = net.profile(x, iterations=iterations, warmup=3)
    by_op: dict[str, float] = defaultdict(float)
    for layer in profile.layers:
        by_op[f"{layer.op}"] += layer.mean_ms
    plain = []
    for _ in range(iterations):
        start = time.perf_counter()
        net(x)
        plain.append((time.perf_counter() - start) * 1e3)
    layers = sorted(profile.layers, key=lambda t: -t.mean_ms)
    return {
        "by_op": dict(by_op),
        "layers": [(t.name, t.op, t.kernel, t.mean_ms) for t in layers],
        "sum_ms": sum(t.mean_ms for t in profile.layers),
        "steps": len(profile.layers),
        "median_ms": float(np.median(plain)),
    }


def ort_profile(model: onnx.ModelProto, name: str, x: np.ndarray, threads: int, iterations: int) -> dict:
    """Per-op-type mean ms of onnxruntime's executed nodes (its profiler's node events)."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        for _ in range(3):
            session.run(None, {name: x})
        plain = []
        for _ in range(iterations):
            start = time.perf_counter()
            session.run(None, {name: x})
            plain.append((time.perf_counter() - start) * 1e3)
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(tmp) / "ort")
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        for _ in range(3 + iterations):
            session.run(None, {name: x})
        events = json.loads(Path(session.end_profiling()).read_text())
    by_op: dict[str, float] = defaultdict(float)
    by_node: dict[str, float] = defaultdict(float)
    nodes = 0
    runs = 0
    for event in events:
        if event.get("cat") == "Session" and event.get("name") == "model_run":
            runs += 1
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            by_op[event["args"]["op_name"]] += event["dur"] / 1e3
            by_node[event["name"].removesuffix("_kernel_time")] += event["dur"] / 1e3
            nodes += 1
    runs = max(runs, 1)
    return {
        "by_op": {k: v / runs for k, v in by_op.items()},
        "by_node": {k: v / runs for k, v in by_node.items()},
        "steps": nodes // runs,
        "median_ms": float(np.median(plain)),
    }


def ort_node_ms(model: onnx.ModelProto, layer: str, by_node: dict[str, float]) -> float | None:
    """onnxruntime's time for edgecnn's step ``layer``: its node of that name, or the node it fused
    the layer into (named after the activation that consumed the layer's output), each possibly
    with the ``_nchwc`` suffix of its blocked-layout rewrite. None where neither is there."""
    outputs = {output for node in model.graph.node if node.name == layer for output in node.output}
    consumers = [node.name for node in model.graph.node if outputs & set(node.input)]
    for name in [layer, *consumers]:
        for candidate in (name, f"{name}_nchwc"):
            if candidate in by_node:
                return by_node[candidate]
    return None


def report(models: list[str], threads: int, iterations: int, top: int) -> str:
    lines = [
        "# edgecnn vs onnxruntime, per operator and per layer",
        "",
        f"Machine: {machine_line()}; batch 1, {threads} thread(s), {iterations} iterations.",
        "",
        f"Command: `.venv/bin/python benchmarks/layer_gap.py --models {','.join(models)} --threads {threads}`",
        "",
        "Per-op sums are means of the profiled runs (hooks add a little per step on edgecnn's side);",
        "ORT fuses Conv+activation and Add into Conv, so compare totals and the big rows.",
    ]
    for model_name in models:
        zoo_entry(model_name)
        model = build_model(model_name)
        name, x = _input(model)
        ours = edgecnn_profile(model, x, threads, iterations)
        theirs = ort_profile(model, name, x, threads, iterations)
        ratio = ours["median_ms"] / theirs["median_ms"]
        lines += [
            "",
            f"## {model_name}: edgecnn {ours['median_ms']:.2f} ms ({ours['steps']} steps), onnxruntime "
            f"{theirs['median_ms']:.2f} ms ({theirs['steps']} nodes): {ratio:.2f}x",
            "",
            "| op | edgecnn ms | onnxruntime ms |",
            "|---|---:|---:|",
        ]
        for op in sorted(set(ours["by_op"]) | set(theirs["by_op"]), key=lambda o: -ours["by_op"].get(o, 0)):
            lines.append(f"| {op} | {ours['by_op'].get(op, 0.0):.3f} | {theirs['by_op'].get(op, 0.0):.3f} |")
        lines += [
            "",
            f"Slowest {top} edgecnn steps:",
            "",
            "| layer | op | kernel | ms | onnxruntime node of that name, ms |",
            "|---|---|---|---:|---:|",
        ]
        for layer, op, kernel, ms in ours["layers"][:top]:
            node = ort_node_ms(model, layer, theirs["by_node"])
            lines.append(
                f"| {layer} | {op} | {kernel} | {ms:.3f} | {'' if node is None else f'{node:.3f}'} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenetv2,shufflenetv2,resnet18,lenet5,simplecnn")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--output", type=Path, default=Path(__file__).parent.parent / "docs" / "layer-gap.md")
    args = parser.parse_args()
    text = report(args.models.split(","), args.threads, args.iterations, args.top)
    print(text)
    args.output.write_text(text)


if __name__ == "__main__":
    main()
