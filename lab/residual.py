"""What fusing residual tails (conv -> Add -> ReLU into one FusedConvAdd step) saves (issue 4, item 1).

One process builds two plans of the same zoo model (seeded weights, batch 1): the pass pipeline with
``fuse_residual`` and the same pipeline without it, then times them interleaved (A, B, A, B...) so
that both see the same machine load; medians and minima of the plain runs, then one profiled pass per
plan for the per-op split. Writes docs/fusion.md (or --output) and prints it.

    .venv/bin/python lab/residual.py --models resnet18,resnet50,mobilenetv2 --threads 2 --runs 30 --epilogue
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx

from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model
from edgecnn.importers import load_graph
from edgecnn.ir.graph import Graph
from edgecnn.model import Model
from edgecnn.passes import PIPELINE, optimize
from edgecnn.passes.pipeline import GraphPass, pipeline_without
from edgecnn.runtime.options import RuntimeOptions

COMMAND = ".venv/bin/python lab/residual.py"

ABOUT = """# Residual fusion: conv + Add + activation as one step

`fuse_residual` (src/edgecnn/passes/fuse_residual.py, in the pipeline right after `fuse_activation`)
rewrites a residual block's tail, `y = act(conv(x) + z)`, into one `FusedConvAdd` node (inputs x, w,
bias or empty, z; attributes FusedConvAttrs). It applies when:

- the producer is a Conv, or a FusedConv without activation, and the Add is the only reader of its
  output, in either operand position (a projection shortcut, where both operands are convs, fuses the
  later one);
- the other operand is a variable tensor (not a constant) of exactly the same dtype and shape, every
  dimension known (a size or the same symbol; a residual that broadcasts keeps its Add);
- the conv output is not a graph output. An activation that `fuse_activation` knows (Relu, LeakyRelu,
  Clip with constant bounds, Sigmoid, HardSwish, SiLU as x*sigmoid(x)) that alone reads the sum is
  absorbed as well, unless the sum itself is a graph output.

At width 1, ResNet-18 has 8 such tails, ResNet-50 16 (all with ReLU), MobileNetV2 10 (no activation
after the sum).

Kernels. CPU (src/edgecnn/kernels/cpu/conv/residual.py): the convolution kernel the registry picks for
the same layer as a FusedConv without activation (Winograd, 1x1 GEMM, im2col + GEMM, sparse...) writes
into the output, then one compiled pass `y = act(y + z)` (epilogue.residual_activation_, serial below 1M
elements) replaces the Add (a numpy ufunc) and activation steps. The output never shares z's buffer (the
kernel does not declare in_place). OpenCL and CUDA run their convolution, then add and activate in place
(two launches); the CUDA path is untested on a GPU. Every kernel is tested against the reference, the
unfused sequence (tests/kernels/cpu/conv/test_residual.py, tests/kernels/gpu/backends/test_conv_residual.py).

See what it did on a model:

    .venv/bin/edgecnn info MODEL.onnx --passes     # lists "fused convN (Conv) + addN (Add) + reluN (Relu) -> FusedConvAdd (relu)"

Compare with and without it from Python (what this page's benchmark does):

    from edgecnn.passes import optimize
    from edgecnn.passes.pipeline import pipeline_without
    graph_without, _ = optimize(graph, pipeline_without("fuse_residual"))"""


def pipelines() -> dict[str, Sequence[tuple[str, GraphPass]]]:
    """The pipeline as Model runs it (with fuse_residual), and the same without that pass."""
    return {"without": pipeline_without("fuse_residual"), "with": PIPELINE}


def load(name: str) -> Graph:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.onnx"
        onnx.save(build_model(name), str(path))
        return load_graph(path).topologically_sorted()


def models_for(graph: Graph, threads: int) -> dict[str, Model]:
    """One Model per pipeline, planned from the graph that pipeline produced."""
    options = RuntimeOptions.resolve(threads=threads, optimize=False)
    return {label: Model(optimize(graph, passes)[0], options) for label, passes in pipelines().items()}


def interleaved(models: dict[str, Model], x: np.ndarray, runs: int) -> dict[str, list[float]]:
    """Milliseconds of ``runs`` plain runs of each model, alternating between them."""
    times: dict[str, list[float]] = {label: [] for label in models}
    for _ in range(runs):
        for label, model in models.items():
            start = time.perf_counter()
            model(x)
            times[label].append((time.perf_counter() - start) * 1e3)
    return times


def profiled(
    models: dict[str, Model], x: np.ndarray, iterations: int
) -> dict[str, dict[str, tuple[str, float]]]:
    """Per plan, each step's median ms over ``iterations`` profiled runs, alternating between the
    plans like the plain runs: {label: {layer name: (op, ms)}}."""
    samples: dict[str, dict[str, tuple[str, list[float]]]] = {label: {} for label in models}
    for _ in range(iterations):
        for label, model in models.items():
            for layer in model.profile(x, iterations=1, warmup=0).layers:
                samples[label].setdefault(layer.name, (layer.op, []))[1].append(layer.mean_ms)
    return {
        label: {name: (op, float(np.median(ms)), float(np.min(ms))) for name, (op, ms) in layers.items()}
        for label, layers in samples.items()
    }


def tail_names(models: dict[str, Model]) -> tuple[set[str], set[str]]:
    """(steps of the unfused plan that the pass replaced, the FusedConvAdd steps replacing them):
    the fused step keeps its conv's name; the Add and activation names disappear."""
    without = {n.name for n in models["without"].graph.nodes}
    fused = {n.name for n in models["with"].graph.nodes if n.op == "FusedConvAdd"}
    kept = {n.name for n in models["with"].graph.nodes}
    return (without - kept) | fused, fused


EPILOGUE_SHAPES = ((64, 56, 56), (128, 28, 28), (256, 14, 14), (512, 7, 7), (256, 56, 56), (1024, 14, 14))
"""The sums of ResNet-18 (first four) and ResNet-50's largest two, at batch 1."""


def time_sum_pass(size: int, threads: int, runs: int) -> dict[str, float]:
    """Median microseconds of y = relu(y + z) over ``size`` elements: the compiled pass serial and
    parallel, and what the unfused steps run (numpy's add into the output, then the kernel the plan
    picks for a Relu step, in place), interleaved."""
    from edgecnn.ir.graph import Node, TensorType
    from edgecnn.kernels.cpu.gemm.epilogue import residual_activation_, residual_activation_serial_
    from edgecnn.kernels.registry import select_kernel
    from edgecnn.ops.registry import NoAttrs

    rng = np.random.default_rng(0)
    y, z = rng.standard_normal(size, dtype=np.float32), rng.standard_normal(size, dtype=np.float32)
    chunk = max(16384, -(-size // threads))
    relu = select_kernel(
        Node("Relu", "relu", ["s"], ["y"], NoAttrs()), [TensorType("float32", (size,))], [None]
    )
    relu_into = getattr(relu.run, "run_into", None)

    def unfused() -> None:
        np.add(y, z, out=y)
        if relu_into is not None:
            relu_into(y, y)
        else:
            np.maximum(y, 0, out=y)

    candidates = {
        "serial": lambda: residual_activation_serial_(y, z, 1, 0.0, 0.0, 0.0, chunk),
        "parallel": lambda: residual_activation_(y, z, 1, 0.0, 0.0, 0.0, chunk),
        "numpy": unfused,
    }
    times: dict[str, list[float]] = {label: [] for label in candidates}
    for _ in range(5 * runs):
        for label, run in candidates.items():
            start = time.perf_counter()
            run()
            times[label].append((time.perf_counter() - start) * 1e6)
        y[:] = z  # keep the values bounded
    return {label: float(np.median(t[runs:])) for label, t in times.items()}  # the first runs warm up


def epilogue_table(threads: int, runs: int) -> list[str]:
    """The sum pass alone on ResNet's sum sizes (why CpuTuning.residual_grain keeps them serial)."""
    from edgecnn.kernels.cpu.system.threads import cpu_threads

    lines = [
        "| sum shape | elements | serial pass us | parallel pass us | unfused: numpy add + Relu kernel us |",
        "|---|---:|---:|---:|---:|",
    ]
    with cpu_threads(threads):
        for shape in EPILOGUE_SHAPES:
            size = int(np.prod(shape))
            us = time_sum_pass(size, threads, runs)
            lines.append(
                f"| {'x'.join(map(str, shape))} | {size} | {us['serial']:.1f} | {us['parallel']:.1f} "
                f"| {us['numpy']:.1f} |"
            )
    return lines


def report(names: list[str], threads: int, runs: int, epilogue: bool) -> str:
    start_load = os.getloadavg()
    rows, splits = [], []
    for name in names:
        graph = load(name)
        models = models_for(graph, threads)
        x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
        outputs = {label: m(x) for label, m in models.items()}  # warm-up: plans, arenas, compiled kernels
        for m in models.values():
            m(x)
        scale = float(np.abs(outputs["without"]).max())
        difference = float(np.abs(outputs["with"] - outputs["without"]).max()) / scale
        times = interleaved(models, x, runs)
        steps = {label: len(m.plan_for(x).steps) for label, m in models.items()}
        median = {label: float(np.median(t)) for label, t in times.items()}
        fastest = {label: float(np.min(t)) for label, t in times.items()}
        rows.append(
            f"| {name} | {steps['without']} -> {steps['with']} | {median['without']:.2f} | {median['with']:.2f} "
            f"| {median['without'] / median['with']:.3f}x | {fastest['without']:.2f} | {fastest['with']:.2f} "
            f"| {difference:.1e} |"
        )
        steps_ms = profiled(models, x, runs)
        replaced, fused = tail_names(models)
        keep = {"without": replaced, "with": fused}
        tails = {
            label: [sum(t[k] for layer, t in steps_ms[label].items() if layer in keep[label]) for k in (1, 2)]
            for label in models
        }
        ops: dict[str, dict[str, list[float]]] = {label: defaultdict(lambda: [0.0, 0.0]) for label in models}
        for label, layers in steps_ms.items():
            for op, median_ms, min_ms in layers.values():
                ops[label][op][0] += median_ms
                ops[label][op][1] += min_ms
        splits.append(
            f"| {name} | the {len(fused)} residual tails: conv + Add (+ ReLU) steps vs FusedConvAdd "
            f"| {tails['without'][0]:.2f} | {tails['with'][0]:.2f} "
            f"| {tails['without'][1]:.2f} | {tails['with'][1]:.2f} |"
        )
        for op in ("Add", "Relu", "Conv", "FusedConv", "FusedConvAdd"):
            a, b = ops["without"].get(op, [0.0, 0.0]), ops["with"].get(op, [0.0, 0.0])
            if a[0] or b[0]:
                splits.append(
                    f"| {name} | all {op} steps | {a[0]:.2f} | {b[0]:.2f} | {a[1]:.2f} | {b[1]:.2f} |"
                )
    end_load = os.getloadavg()
    machine = f"{cpu_model()}, {os.cpu_count()} cores (a VM, no GPU)"
    shared = max(start_load[0], end_load[0]) > 0.5
    return "\n".join(
        [
            *ABOUT.splitlines(),
            "",
            "## Measured",
            "",
            f"Machine: {machine}; load average {start_load[0]:.2f} / {start_load[1]:.2f} / {start_load[2]:.2f} at "
            f"start, {end_load[0]:.2f} at the end"
            + (" (shared: other jobs were running)" if shared else "")
            + ".",
            *(
                [
                    "With other jobs on the two cores, run-to-run noise (milliseconds) is larger than the effect",
                    "measured here (tens of microseconds per fused block): rerun on a quiet machine before reading",
                    "the speed-up column. The minima are the least disturbed runs.",
                ]
                if shared
                else []
            ),
            f"Batch 1, 224x224, {threads} threads, {runs} interleaved runs per plan (warm-up excluded).",
            "",
            f"Command: `{COMMAND} --models {','.join(names)} --threads {threads} --runs {runs}"
            + (" --epilogue`" if epilogue else "`"),
            "",
            "| model | steps (without -> with) | without ms (median) | with ms (median) | speed-up "
            "| without ms (min) | with ms (min) | max rel. difference |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            f"Per step (median ms of {runs} profiled runs, interleaved like the plain runs; hooks add a little",
            "per step): the steps the pass replaced against the FusedConvAdd steps that replaced them, then",
            "totals per op type.",
            "",
            "| model | steps | without (median) | with (median) | without (min) | with (min) |",
            "|---|---|---:|---:|---:|---:|",
            *splits,
            "",
            *(
                [
                    f"The add + ReLU pass alone, {threads} threads (`--epilogue`): the compiled pass serial, the",
                    "same pass parallel, and the unfused steps' work (numpy's add, then the Relu step's kernel, in",
                    "place); median microseconds, interleaved.",
                    "",
                    *epilogue_table(threads, runs),
                    "",
                ]
                if epilogue
                else []
            ),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,resnet50,mobilenetv2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--epilogue", action="store_true", help="Also time the add + ReLU pass alone.")
    parser.add_argument(
        "--output", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "fusion.md"
    )
    args = parser.parse_args()
    text = report(args.models.split(","), args.threads, args.runs, args.epilogue)
    args.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
