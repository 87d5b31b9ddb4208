"""Issue 5's sparse target: the AlexNet-shaped FC stack (9216 -> 4096 -> 4096 -> 1000, ReLU between)
with seeded random weights, every layer magnitude-pruned to 15% density.

Reports the stored size (pruned + CSR .ecnn against the dense .ecnn; target <= 35%) and batch-1
latency of: edgecnn on the dense stack, edgecnn on the pruned stack with its dense kernel, edgecnn
on the pruned stack with the sparse (CSR SpMV) kernel the runtime picks, and onnxruntime on the
dense stack (targets: sparse >= 2.5x faster than edgecnn dense, and faster than onnxruntime). Runs
are interleaved (one of each in turn) so that load from other processes hits all alike; medians.

    .venv/bin/python lab/sparse_fc.py                  # prints and writes docs/compression.md
    .venv/bin/python lab/sparse_fc.py --iterations 20 --no-write
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from common import DOCS, machine_line, tuned, write_section
from edgecnn.compress import compress
from edgecnn.format import load_ecnn, save_ecnn
from edgecnn.importers import load_graph
from edgecnn.kernels.cpu.system.threads import max_threads
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions

SIZES = (9216, 4096, 4096, 1000)
KEEP = 0.15


def fc_stack_onnx(seed: int = 0) -> onnx.ModelProto:
    """Gemm (transB) + ReLU, three times, with He-scaled seeded weights."""
    rng = np.random.default_rng(seed)
    nodes, initializers, previous = [], [], "x"
    for i, (k, n) in enumerate(itertools.pairwise(SIZES)):
        w = (rng.standard_normal((n, k), dtype=np.float32) * np.float32(np.sqrt(2.0 / k))).astype(np.float32)
        b = (rng.standard_normal(n, dtype=np.float32) * np.float32(0.01)).astype(np.float32)
        name = f"fc{6 + i}"
        initializers += [numpy_helper.from_array(w, f"{name}.w"), numpy_helper.from_array(b, f"{name}.b")]
        out = f"{name}.y" if i < 2 else "y"
        nodes.append(
            helper.make_node("Gemm", [previous, f"{name}.w", f"{name}.b"], [out], name=name, transB=1)
        )
        if i < 2:
            nodes.append(helper.make_node("Relu", [out], [f"{name}.relu"], name=f"{name}.relu"))
            previous = f"{name}.relu"
    graph = helper.make_graph(
        nodes,
        "alexnet_fc",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, (1, SIZES[0]))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, (1, SIZES[-1]))],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def interleaved(runs: dict[str, Callable[[], object]], iterations: int) -> dict[str, float]:
    """Median ms of each action over ``iterations`` rounds, one call of each per round."""
    for action in runs.values():
        action()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(iterations):
        for name, action in runs.items():
            start = time.perf_counter()
            action()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--threads", type=int, default=max_threads())
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    args = parser.parse_args()
    options = RuntimeOptions.resolve(threads=args.threads)
    x = np.random.default_rng(1).standard_normal((1, SIZES[0]), dtype=np.float32)
    with tempfile.TemporaryDirectory(prefix="edgecnn-sparse-fc-") as name:
        folder = Path(name)
        onnx_path = folder / "fc.onnx"
        onnx.save(fc_stack_onnx(), onnx_path)
        graph = load_graph(onnx_path)
        dense_path, csr_path, int8_path = folder / "dense.ecnn", folder / "csr.ecnn", folder / "csr_int8.ecnn"
        save_ecnn(graph, dense_path)
        pruned, plan = compress(graph, prune=KEEP)
        save_ecnn(pruned, csr_path, storage=plan)
        pruned_int8, plan_int8 = compress(graph, prune=KEEP, quantize="int8")
        save_ecnn(pruned_int8, int8_path, storage=plan_int8)
        sizes = {p.name: p.stat().st_size for p in (dense_path, csr_path, int8_path)}

        dense = Model(load_ecnn(dense_path), options)
        sparse = Model(load_ecnn(csr_path), options)
        with tuned(spmv_crossover=0.0, spmm_crossover=0.0):
            pruned_dense = Model(load_ecnn(csr_path), options)
            pruned_dense.run({"x": x})  # plan built (dense kernels) while the crossover is 0
        sparse_kernels = sorted({step.kernel.name for step in sparse.plan_for({"x": x}).steps})
        dense_kernels = sorted({step.kernel.name for step in pruned_dense.plan_for({"x": x}).steps})
        session_options = ort.SessionOptions()
        session_options.intra_op_num_threads = args.threads
        session = ort.InferenceSession(str(onnx_path), session_options, providers=["CPUExecutionProvider"])
        expected = pruned_dense.run({"x": x})["y"]
        difference = float(np.abs(sparse.run({"x": x})["y"] - expected).max())
        times = interleaved(
            {
                "edgecnn, dense stack": lambda: dense.run({"x": x}),
                "edgecnn, pruned 15%, dense kernel": lambda: pruned_dense.run({"x": x}),
                "edgecnn, pruned 15%, sparse kernel": lambda: sparse.run({"x": x}),
                "onnxruntime, dense stack": lambda: session.run(None, {"x": x}),
            },
            args.iterations,
        )
    fastest = times["edgecnn, pruned 15%, sparse kernel"]
    size_ratio = sizes["csr.ecnn"] / sizes["dense.ecnn"]
    speedup = times["edgecnn, dense stack"] / fastest
    versus_ort = times["onnxruntime, dense stack"] / fastest
    targets = [
        f"- stored size <= 35% of dense: {size_ratio:.1%} ({'met' if size_ratio <= 0.35 else 'missed'});",
        f"- >= 2.5x faster than the dense stack in edgecnn: {speedup:.2f}x ({'met' if speedup >= 2.5 else 'missed'});",
        f"- faster than onnxruntime's dense stack: {versus_ort:.2f}x ({'met' if versus_ort > 1 else 'missed'}).",
    ]
    lines = [
        "| file | size | vs dense |",
        "|---|---|---|",
        *(
            f"| {label} | {sizes[file] / 1e6:.2f} MB | {sizes[file] / sizes['dense.ecnn']:.1%} |"
            for label, file in (
                ("dense float32 (raw)", "dense.ecnn"),
                ("pruned to 15%, CSR float32 values (int32 indices)", "csr.ecnn"),
                ("pruned to 15%, CSR int8 values", "csr_int8.ecnn"),
            )
        ),
        "",
        f"| batch 1, {args.threads} threads | median (ms) | sparse kernel is faster by |",
        "|---|---|---|",
        *(f"| {label} | {ms:.2f} | {ms / fastest:.2f}x |" for label, ms in times.items()),
    ]
    body = "\n".join(
        [
            "### Sparse kernels: AlexNet-shaped FC stack at 15% density",
            "",
            "9216 -> 4096 -> 4096 -> 1000 with ReLU between, He-scaled seeded weights, each layer",
            f"magnitude-pruned to 15% (`compress(graph, prune=0.15)`). {args.iterations} interleaved rounds.",
            f"Kernels chosen: pruned model {', '.join(sparse_kernels)}; with the crossover forced to 0,",
            f"{', '.join(dense_kernels)}. Max |sparse - dense kernel| on the pruned stack: {difference:.2g}.",
            machine_line(args.threads),
            "Command: `.venv/bin/python lab/sparse_fc.py`.",
            "",
            *lines,
            "",
            "Issue 5's targets, as measured in this run:",
            "",
            *targets,
        ]
    )
    print(body)
    if not args.no_write:
        write_section(DOCS / "compression.md", "sparse-fc", body, before="## Not done yet (rest of issue 5)")


if __name__ == "__main__":
    main()
