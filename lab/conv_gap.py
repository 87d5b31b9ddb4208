"""Where edgecnn's convolutions lose time against onnxruntime, layer by layer (issue 4).

For every convolution step of each zoo model (``edgecnn.bench.zoo.build_model``, batch 1) it times,
interleaved in one process (one call of each per round, medians over the rounds):

- every candidate kernel of the layer, prepared as `edgecnn tune` prepares them (the registry's
  candidates; src/edgecnn/kernels/tuning_measure.py), under ``cpu_threads(threads)``;
- plain ``np.matmul`` of the layer's weights by its im2col matrix with ``threads`` BLAS threads
  (the GEMM alone: what one well-threaded GEMM costs, without im2col or epilogue);
- the im2col unfold alone (compiled ``im2col_2d``, ``threads`` blocks).

onnxruntime's per-node times come from its own profiler (a separate loop; ORT fuses Conv+ReLU and
names the fused node after the last op it absorbed). ``--whole`` measures whole-model medians
instead, edgecnn and onnxruntime runs alternating, wall and process CPU time. Each table goes
between its own markers in lab/notes/2026-11-conv-gap.md (or --output), so one can be rerun without the others.

    .venv/bin/python lab/conv_gap.py --models squeezenet1.1 --threads 2 --rounds 20
    .venv/bin/python lab/conv_gap.py --models '' --whole resnet50,squeezenet1.1 --label after
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from threadpoolctl import threadpool_limits

import edgecnn
from common import (
    NOTES,
    conv_layers,
    interleaved,
    load_model,
    machine_line,
    model_input,
    ort_options,
    replace_section,
)
from edgecnn.bench.zoo import build_model
from edgecnn.kernels.cpu import cpu_threads
from edgecnn.kernels.cpu.conv.im2col import im2col_2d
from edgecnn.kernels.cpu.conv.setup import conv_setup
from edgecnn.kernels.registry import candidate_kernels
from edgecnn.kernels.tuning_measure import example_inputs

DEFAULT_MODELS = "resnet50,squeezenet1.1,tiny-yolo,googlenet"


@dataclass
class LayerRow:
    """One conv layer's measurements (milliseconds, medians)."""

    name: str
    shape: str
    gflop: float
    chosen: str
    kernels: dict[str, float]
    matmul_ms: float
    im2col_ms: float
    ort_ms: float | None = None
    notes: list[str] = field(default_factory=list)


def layer_timers(
    node, types, values, threads: int
) -> tuple[dict[str, Callable[[], object]], Callable[[], object], str, float]:
    """Callables for each candidate kernel and the im2col alone; the GEMM alone; the shape; GFLOP."""
    s = conv_setup(node, types)
    assert s is not None
    inputs = example_inputs(types, values)
    x = inputs[0]
    timers: dict[str, Callable[[], object]] = {}
    for entry in candidate_kernels(node, types, values):
        run = entry.factory(node, types, values)
        out = np.empty((s.batch, s.out_channels, *s.out), dtype=np.float32)

        def kernel(run=run, out=out) -> None:
            with cpu_threads(threads):
                if hasattr(run, "run_into"):
                    run.run_into(out, *inputs)
                else:
                    run(*inputs)

        timers[entry.name] = kernel
    rows = s.in_channels // s.group * s.kernel[0] * s.kernel[1]
    pixels = s.out[0] * s.out[1]
    rng = np.random.default_rng(1)
    weights = rng.standard_normal((s.group, s.out_channels // s.group, rows), dtype=np.float32)
    columns = rng.standard_normal((s.group, rows, pixels), dtype=np.float32)
    product = np.empty((s.group, s.out_channels // s.group, pixels), dtype=np.float32)

    def matmul() -> None:
        for _ in range(s.batch):
            np.matmul(weights, columns, out=product)

    unfolded = np.empty((s.in_channels * s.kernel[0] * s.kernel[1], pixels), dtype=np.float32)

    def im2col() -> None:
        with cpu_threads(threads):
            for n in range(s.batch):
                im2col_2d(
                    x[n], *s.kernel, *s.strides, s.pads[0], s.pads[1], *s.dilations, *s.out, unfolded, threads
                )

    if s.kernel != (1, 1) or s.strides != (1, 1) or any(s.pads):
        timers["im2col"] = im2col
    shape = (
        f"{s.in_channels}->{s.out_channels} {s.kernel[0]}x{s.kernel[1]}/{s.strides[0]}"
        f"{' g' + str(s.group) if s.group > 1 else ''} @{s.out[0]}x{s.out[1]}"
    )
    gflop = 2.0 * s.batch * s.out_channels * pixels * rows / 1e9
    return timers, matmul, shape, gflop


def ort_node_times(
    model: onnx.ModelProto, name: str, x: np.ndarray, threads: int, runs: int
) -> dict[str, float]:
    """Median ms per executed node name, from onnxruntime's profiler (options as `edgecnn bench`)."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        options = ort_options(threads)
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(tmp) / "ort")
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        for _ in range(runs):
            session.run(None, {name: x})
        events = json.loads(Path(session.end_profiling()).read_text())
    totals: dict[str, list[float]] = defaultdict(list)
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            totals[event["name"][: -len("_kernel_time")]].append(event["dur"] / 1e3)
    # the first runs include ORT's own warm-up: median per node
    return {node: float(np.median(values)) for node, values in totals.items()}


FUSABLE = ("BatchNormalization", "Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSwish", "Add", "Mul")


def fused_names(model: onnx.ModelProto) -> dict[str, list[str]]:
    """For each Conv, its name and those of the ops onnxruntime may fuse into it (the chain of single
    consumers: BatchNormalization, activation, Add); ORT names a fused node after the last of them."""
    consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in model.graph.node:
        for value in node.input:
            consumers[value].append(node)
    chains = {}
    for node in model.graph.node:
        if node.op_type != "Conv":
            continue
        chain, current = [node.name], node
        while len(consumers[current.output[0]]) == 1 and consumers[current.output[0]][0].op_type in FUSABLE:
            current = consumers[current.output[0]][0]
            chain.append(current.name)
        chains[node.name] = chain
    return chains


def ort_conv_time(chain: list[str], ort_times: dict[str, float]) -> float | None:
    """ORT's time for the node that ran this conv: the last name of the chain it knows (with or
    without its layout transformer's ``_nchwc`` suffix)."""
    for name in reversed(chain):
        for candidate in (name, f"{name}_nchwc"):
            if candidate in ort_times:
                return ort_times[candidate]
    return None


def whole_model(model_name: str, threads: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Median (wall ms, process CPU ms) of edgecnn's and onnxruntime's whole run, runs alternating.
    CPU time counts the work of all the process's threads; on a shared machine it moves much less
    with the load than the wall time (a preempted thread's wait is not counted)."""
    import onnxruntime as ort

    model = build_model(model_name)
    name, x = model_input(model)
    net = load_model(model, threads)
    session = ort.InferenceSession(
        model.SerializeToString(), ort_options(threads), providers=["CPUExecutionProvider"]
    )
    runs = {"edgecnn": lambda: net(x), "onnxruntime": lambda: session.run(None, {name: x})}
    samples: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for round_ in range(rounds + 3):
        for engine, run in runs.items():
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            if round_ >= 3:
                samples[engine].append(
                    ((time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3)
                )
    return {
        engine: (float(np.median([w for w, _ in v])), float(np.median([c for _, c in v])))
        for engine, v in samples.items()
    }


def measure_model(model_name: str, threads: int, rounds: int) -> list[LayerRow]:
    model = build_model(model_name)
    name, x = model_input(model)
    net = load_model(model, threads)
    ort_times = ort_node_times(model, name, x, threads, rounds + 3)
    onnx_names = fused_names(model)
    rows, matmuls = [], []
    for node, types, values, chosen in conv_layers(net, x):
        timers, matmul, shape, gflop = layer_timers(node, types, values, threads)
        times = interleaved(timers, rounds)
        kernels = {k: v for k, v in times.items() if k != "im2col"}
        row = LayerRow(node.name, shape, gflop, chosen, kernels, 0.0, times.get("im2col", 0.0))
        row.ort_ms = ort_conv_time(onnx_names.get(node.name, [node.name]), ort_times)
        rows.append(row)
        matmuls.append(matmul)
    # after all kernels: OpenBLAS's own workers spin-wait for a while after each multi-threaded call
    # and would take a core from the numba kernels timed next
    with threadpool_limits(threads, user_api="blas"):
        for row, matmul in zip(rows, matmuls):
            row.matmul_ms = interleaved({"np.matmul": matmul}, rounds)["np.matmul"]
    time.sleep(0.5)
    return rows


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def model_table(model_name: str, rows: list[LayerRow]) -> list[str]:
    """The per-layer table plus the totals that say where the loss is."""
    names = sorted({k for r in rows for k in r.kernels}, key=lambda k: k)
    chosen_total = sum(r.kernels.get(r.chosen, 0.0) for r in rows)
    best_total = sum(min(r.kernels.values()) for r in rows)
    ort_total = sum(r.ort_ms or 0.0 for r in rows)
    gemm_total = sum(r.matmul_ms for r in rows)
    im2col_total = sum(r.im2col_ms for r in rows)
    gflop = sum(r.gflop for r in rows)
    lines = [
        "",
        f"#### {model_name}",
        "",
        f"{len(rows)} conv layers, {gflop:.2f} GFLOP. Totals (ms): chosen kernels {chosen_total:.2f} "
        f"({gflop / chosen_total * 1e3:.0f} GFLOP/s), best candidate per layer {best_total:.2f}, onnxruntime "
        f"{ort_total:.2f} ({gflop / max(ort_total, 1e-9) * 1e3:.0f} GFLOP/s), np.matmul alone {gemm_total:.2f} "
        f"({gflop / gemm_total * 1e3:.0f} GFLOP/s), im2col alone {im2col_total:.2f}.",
        "",
        "| layer | shape | GFLOP | chosen | "
        + " | ".join(names)
        + " | np.matmul | im2col | onnxruntime | chosen/ORT |",
        "|---|---|---:|---|" + "---:|" * len(names) + "---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = [_ms(r.kernels.get(k)) for k in names]
        best = min(r.kernels, key=r.kernels.__getitem__)
        cells = [f"**{c}**" if k == best else c for k, c in zip(names, cells)]
        ratio = "-" if not r.ort_ms else f"{r.kernels[r.chosen] / r.ort_ms:.2f}x"
        lines.append(
            f"| {r.name} | {r.shape} | {r.gflop:.3f} | {r.chosen} | "
            + " | ".join(cells)
            + f" | {r.matmul_ms:.3f} | {_ms(r.im2col_ms or None)} | {_ms(r.ort_ms)} | {ratio} |"
        )
    return lines


def conv_gap_section(text: str, name: str, body: list[str]) -> str:
    """``text`` with its ``conv-gap:NAME`` block replaced by ``body``."""
    return replace_section(text, f"conv-gap:{name}", body)


def whole_section(models: list[str], threads: int, rounds: int, label: str) -> list[str]:
    lines = [
        f"### Whole models, {label} ({threads} thread(s), medians of {rounds} alternating runs)",
        "",
        f"Machine: {machine_line()}. edgecnn imported from `{Path(edgecnn.__file__).parent}`.",
        "",
        f"Command: `.venv/bin/python lab/conv_gap.py --models '' --whole {','.join(models)} "
        f"--threads {threads} --whole-rounds {rounds} --label {label}`",
        "",
        "| model | edgecnn ms | onnxruntime ms | ratio | edgecnn CPU ms | onnxruntime CPU ms | CPU ratio | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model_name in models:
        t = whole_model(model_name, threads, rounds)
        (ours, ours_cpu), (theirs, theirs_cpu) = t["edgecnn"], t["onnxruntime"]
        lines.append(
            f"| {model_name} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f}x | {ours_cpu:.2f} | "
            f"{theirs_cpu:.2f} | {ours_cpu / theirs_cpu:.2f}x | {os.getloadavg()[0]:.2f} |"
        )
        print(lines[-1], flush=True)
    return lines


def layers_section(models: list[str], threads: int, rounds: int) -> list[str]:
    lines = [
        f"### Per layer, {threads} thread(s)",
        "",
        f"Machine: {machine_line()}; batch 1, medians of {rounds} interleaved rounds.",
        "",
        f"Command: `.venv/bin/python lab/conv_gap.py --models {','.join(models)} --threads {threads} "
        f"--rounds {rounds}`",
    ]
    for model_name in models:
        lines += model_table(model_name, measure_model(model_name, threads, rounds))
        print("\n".join(lines[-3:]), flush=True)
    lines += ["", f"Load average at the end: {os.getloadavg()[0]:.2f}."]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_MODELS, help="models timed layer by layer ('' skips)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--whole", default="", help="models whose whole-run medians to measure (comma list)")
    parser.add_argument("--whole-rounds", type=int, default=30)
    parser.add_argument("--label", default="current", help="name of the whole-model table (before, after...)")
    parser.add_argument("--output", type=Path, default=NOTES / "2026-11-conv-gap.md")
    args = parser.parse_args()
    text = args.output.read_text(encoding="utf-8") if args.output.exists() else "# Convolution gap\n"
    if args.whole:
        body = whole_section(args.whole.split(","), args.threads, args.whole_rounds, args.label)
        text = conv_gap_section(text, f"whole-{args.label}-{args.threads}t", body)
    models = [m for m in args.models.split(",") if m]
    if models:
        body = layers_section(models, args.threads, args.rounds)
        text = conv_gap_section(text, f"layers-{args.threads}t", body)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
