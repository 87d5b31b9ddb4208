"""edgecnn / onnxruntime latency ratios, run interleaved in one process, with onnxruntime's thread
spinning on (its default), off, and on only during its runs.

Why: onnxruntime's intra-op workers spin-wait after each run; when runs of the two engines alternate
(as in `edgecnn bench`), those spinning workers hold the cores that edgecnn's next run needs, and
edgecnn's time doubles on a 2-core machine. With spinning off, each engine gets the cores it asks
for, but every operator wakes sleeping workers. "in-run" keeps spinning within a run and stops it
when the run returns (``session.force_spinning_stop``): what `edgecnn bench` uses. Writes
lab/notes/2026-11-interleaved.md (or --output) and prints it.

    .venv/bin/python lab/interleaved.py --models mobilenetv2,lenet5 --threads 2 --rounds 30
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

import edgecnn
from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model


def machine_line() -> str:
    """CPU, cores and load: the numbers are only comparable on a quiet machine (load near 0)."""
    load = os.getloadavg()[0]
    shared = " (shared: other jobs were running)" if load > 0.5 else ""
    return f"{cpu_model()}, {os.cpu_count()} cores, load average {load:.2f} at start{shared}"


SPINNING = {"on": ("1", "0"), "off": ("0", "0"), "in-run": ("1", "1")}
"""onnxruntime's session.intra_op.allow_spinning and session.force_spinning_stop per mode."""


def _session(path: str, threads: int, spinning: str):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    allow, stop = SPINNING[spinning]
    options.add_session_config_entry("session.intra_op.allow_spinning", allow)
    options.add_session_config_entry("session.force_spinning_stop", stop)
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def measure(name: str, threads: int, rounds: int, spinning: str) -> tuple[float, float]:
    """Median ms of edgecnn and onnxruntime, their runs alternating."""
    model = build_model(name)
    shape = [d.dim_value or 1 for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / f"{name}.onnx")
        onnx.save(model, path)
        net = edgecnn.load(path, threads=threads)
        session = _session(path, threads, spinning)
    feed = {session.get_inputs()[0].name: x}
    ours, theirs = [], []
    for index in range(rounds + 3):
        start = time.perf_counter()
        net(x)
        middle = time.perf_counter()
        session.run(None, feed)
        end = time.perf_counter()
        if index >= 3:
            ours.append(middle - start)
            theirs.append(end - middle)
    return float(np.median(ours)) * 1e3, float(np.median(theirs)) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenetv2,shufflenetv2,resnet18,lenet5,simplecnn")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument(
        "--output", type=Path, default=Path(__file__).parent / "notes" / "2026-11-interleaved.md"
    )
    args = parser.parse_args()
    lines = [
        "# edgecnn vs onnxruntime, interleaved runs, onnxruntime spinning on, off and in-run only",
        "",
        f"Machine: {machine_line()}; batch 1, {args.threads} thread(s), {args.rounds} rounds (medians).",
        "",
        f"Command: `.venv/bin/python lab/interleaved.py --models {args.models} "
        f"--threads {args.threads} --rounds {args.rounds}`",
        "",
        "| model | spinning | edgecnn ms | onnxruntime ms | ratio |",
        "|---|---|---:|---:|---:|",
    ]
    ratios: dict[str, list[float]] = {mode: [] for mode in SPINNING}
    for name in args.models.split(","):
        for spinning in SPINNING:
            ours, theirs = measure(name, args.threads, args.rounds, spinning)
            ratios[spinning].append(ours / theirs)
            lines.append(f"| {name} | {spinning} | {ours:.3f} | {theirs:.3f} | {ours / theirs:.2f}x |")
    for spinning, values in ratios.items():
        mean = float(np.exp(np.mean(np.log(values))))
        lines.append(f"\nGeometric mean, spinning {spinning}: {mean:.2f}x")
    text = "\n".join(lines) + "\n"
    print(text)
    args.output.write_text(text)


if __name__ == "__main__":
    main()
