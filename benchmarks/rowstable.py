"""Row (output-channel) position invariance of the conv GEMMs, and what making it hold costs:
the measurements behind kernels/cpu/rowstable.py (the light SqueezeNet of the ONNX suite).

    .venv/bin/python benchmarks/rowstable.py            # writes docs/benchmarks/rowstable.md

Five tables: (1) how many distinct output rows each GEMM call shape gives when every weight row
is the same constant (1 means the rows are position-invariant); (2) a numba GEMM that sums every
output element in the same k order (so rows are position-invariant by construction) against
OpenBLAS's sgemm, one thread, on SqueezeNet 1.1's GEMM shapes; (3) the plan-time cost of looking
for repeated filters in zoo-sized weights that have none; (4) the light SqueezeNet end to end,
with and without the shared_filters kernel; (5) plan time and latency of light-zoo graphs whose
weights were replaced by random ones (no repeats), with and without the rowstable kernels.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numba
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu import cpu_threads
from edgecnn.kernels.cpu.system.blas import gemm_into
from edgecnn.kernels.registry import select_kernel
from edgecnn.ops.conv import ConvAttrs

SQUEEZENET_GEMMS = [  # (output channels, K = Cin*KH*KW, output pixels) of SqueezeNet 1.1 at 224x224
    (64, 27, 12321),
    (16, 64, 3025),
    (64, 16, 3025),
    (64, 144, 3025),
    (16, 128, 3025),
    (32, 128, 729),
    (128, 32, 729),
    (128, 288, 729),
    (32, 256, 729),
    (48, 256, 169),
    (192, 48, 169),
    (192, 432, 169),
    (48, 384, 169),
    (64, 384, 169),
    (256, 64, 169),
    (256, 576, 169),
    (64, 512, 169),
    (1000, 512, 169),
]

ZOO_FILTERS = [  # (filters, K) of the largest conv layers of VGG-19, ResNet-50, AlexNet and the light zoo
    (512, 4608),
    (256, 2304),
    (2048, 512),
    (512, 2048),
    (1024, 256),
    (384, 2304),
    (256, 1200),
    (1000, 512),
    (4096, 9216),
]


@numba.njit(cache=True, boundscheck=False)
def gemm_k_ordered(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """c = a @ b with c[m, p] = (((a[m,0] b[0,p] + a[m,1] b[1,p]) + ...) in k order for every element
    (no FMA: numba does not contract), vectorised along p; 4 rows and 4 k per pass over a 512-wide
    block of c, one row at a time for the last rows. The candidate that was measured and rejected."""
    m, depth = a.shape
    n = b.shape[1]
    for p0 in range(0, n, 512):
        p1 = min(p0 + 512, n)
        w = p1 - p0
        r = 0
        while r < m:
            rows = min(4, m - r)
            for q in range(rows):
                cq, x0, a0 = c[r + q, p0:p1], b[0, p0:p1], a[r + q, 0]
                for j in range(w):
                    cq[j] = a0 * x0[j]
            if rows == 4:
                c0, c1, c2, c3 = c[r, p0:p1], c[r + 1, p0:p1], c[r + 2, p0:p1], c[r + 3, p0:p1]
                k = 1
                while k + 3 < depth:
                    x, y, z, t = b[k, p0:p1], b[k + 1, p0:p1], b[k + 2, p0:p1], b[k + 3, p0:p1]
                    w0, v0, u0, s0 = a[r, k], a[r, k + 1], a[r, k + 2], a[r, k + 3]
                    w1, v1, u1, s1 = a[r + 1, k], a[r + 1, k + 1], a[r + 1, k + 2], a[r + 1, k + 3]
                    w2, v2, u2, s2 = a[r + 2, k], a[r + 2, k + 1], a[r + 2, k + 2], a[r + 2, k + 3]
                    w3, v3, u3, s3 = a[r + 3, k], a[r + 3, k + 1], a[r + 3, k + 2], a[r + 3, k + 3]
                    for j in range(w):
                        xj, yj, zj, tj = x[j], y[j], z[j], t[j]
                        c0[j] = (((c0[j] + w0 * xj) + v0 * yj) + u0 * zj) + s0 * tj
                        c1[j] = (((c1[j] + w1 * xj) + v1 * yj) + u1 * zj) + s1 * tj
                        c2[j] = (((c2[j] + w2 * xj) + v2 * yj) + u2 * zj) + s2 * tj
                        c3[j] = (((c3[j] + w3 * xj) + v3 * yj) + u3 * zj) + s3 * tj
                    k += 4
                while k < depth:
                    x = b[k, p0:p1]
                    w0, w1, w2, w3 = a[r, k], a[r + 1, k], a[r + 2, k], a[r + 3, k]
                    for j in range(w):
                        xj = x[j]
                        c0[j] = c0[j] + w0 * xj
                        c1[j] = c1[j] + w1 * xj
                        c2[j] = c2[j] + w2 * xj
                        c3[j] = c3[j] + w3 * xj
                    k += 1
            else:
                for q in range(rows):
                    cq = c[r + q, p0:p1]
                    for k in range(1, depth):
                        x, wq = b[k, p0:p1], a[r + q, k]
                        for j in range(w):
                            cq[j] = cq[j] + wq * x[j]
            r += rows


def best_ms(budget: float, fn: Callable[..., Any], *args: Any) -> float:
    """The fastest of repeated ``fn(*args)`` calls (after one warm-up) within ``budget`` seconds, in ms."""
    fn(*args)
    best, start = float("inf"), time.perf_counter()
    while time.perf_counter() - start < budget:
        t = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def gemv_per_row(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """c = a @ b as one sgemv per row (gemm_into's one-row path): each row computed alone."""
    for r in range(a.shape[0]):
        gemm_into(a[r : r + 1], b, False, c[r : r + 1])


def distinct_rows(c: np.ndarray) -> int:
    return len({row.tobytes() for row in c})


@contextmanager
def shared_filters(enabled: bool) -> Iterator[None]:
    """Within the block, the registry offers the shared_filters kernel only if ``enabled``."""
    from edgecnn.kernels.registry import _KERNELS, import_pending

    import_pending("cpu")  # every lazily registered CPU module now, so the copy below holds them all

    registered = {key: list(entries) for key, entries in _KERNELS.items()}
    try:
        for key, entries in registered.items():
            _KERNELS[key] = [e for e in entries if enabled or e.name != "shared_filters"]
        yield
    finally:
        _KERNELS.update(registered)


def conv_kernel(x: np.ndarray, w: np.ndarray) -> Any:
    """The registry's ordinary CPU kernel for a plain conv with constant weights ``w`` (name, callable)."""
    node = Node("Conv", "conv", ["x", "w"], ["y"], ConvAttrs())
    types = [TensorType("float32", x.shape), TensorType("float32", w.shape)]
    with shared_filters(False):
        return select_kernel(node, types, [None, w], "cpu")


def row_classes(budget: float) -> list[str]:
    rng = np.random.default_rng(0)
    lines = [
        "| M x K x P | sgemm C = W X (edgecnn) | sgemm C^T = X^T W^T (reference path) "
        "| sgemv per row | gemm_1x1 kernel, 1 / 2 threads | k-ordered numba GEMM |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for m, k, p in SQUEEZENET_GEMMS:
        w = np.full((m, k), 0.02, np.float32)
        x = (rng.random((k, p), dtype=np.float32) * 1e6).astype(np.float32)
        direct = np.empty((m, p), np.float32)
        with threadpool_limits(1):
            gemm_into(w, x, False, direct)
            transposed = np.ascontiguousarray(x.T) @ np.ascontiguousarray(w.T)
            per_row = np.empty((m, p), np.float32)
            gemv_per_row(w, x, per_row)
        choice = conv_kernel(x[None].reshape(1, k, p, 1), w.reshape(m, k, 1, 1))
        tiled = []
        for threads in (1, 2):
            with cpu_threads(threads):
                tiled.append(distinct_rows(choice.run(x.reshape(1, k, p, 1)).reshape(m, p)))
        ordered = np.empty((m, p), np.float32)
        gemm_k_ordered(w, x, ordered)
        lines.append(
            f"| {m} x {k} x {p} | {distinct_rows(direct)} | {distinct_rows(transposed.T)} "
            f"| {distinct_rows(per_row)} | {tiled[0]} / {tiled[1]} ({choice.name}) | {distinct_rows(ordered)} |"
        )
    return lines


def gemm_speed(budget: float) -> list[str]:
    rng = np.random.default_rng(1)
    lines = [
        "| M x K x P | OpenBLAS sgemm (ms) | k-ordered numba (ms) | ratio | sgemv per row (ms) | ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    totals = np.zeros(3)
    with threadpool_limits(1):
        for m, k, p in SQUEEZENET_GEMMS:
            a = rng.standard_normal((m, k), dtype=np.float32)
            b = rng.standard_normal((k, p), dtype=np.float32)
            c = np.empty((m, p), np.float32)
            times = [
                best_ms(budget, gemm_into, a, b, False, c),
                best_ms(budget, gemm_k_ordered, a, b, c),
                best_ms(budget, gemv_per_row, a, b, c),
            ]
            totals += times
            lines.append(
                f"| {m} x {k} x {p} | {times[0]:.3f} | {times[1]:.3f} | {times[1] / times[0]:.2f}x "
                f"| {times[2]:.3f} | {times[2] / times[0]:.2f}x |"
            )
    lines.append(
        f"| **sum** | **{totals[0]:.3f}** | **{totals[1]:.3f}** | **{totals[1] / totals[0]:.2f}x** "
        f"| **{totals[2]:.3f}** | **{totals[2] / totals[0]:.2f}x** |"
    )
    return lines


def detection_cost(budget: float) -> list[str]:
    from edgecnn.kernels.cpu.rowstable import repeated_rows

    rng = np.random.default_rng(2)
    lines = ["| filters x K | repeated_rows (ms) | found |", "|---|---:|---|"]
    total = 0.0
    for m, k in ZOO_FILTERS:
        w = rng.standard_normal((m, k), dtype=np.float32)
        found = repeated_rows(w)
        ms = best_ms(budget, repeated_rows, w)
        total += ms
        lines.append(f"| {m} x {k} | {ms:.3f} | {'repeats' if found is not None else 'none'} |")
    lines.append(f"| **sum** | **{total:.3f}** | |")
    return lines


def light_squeezenet(budget: float) -> list[str]:
    import onnx
    from onnx import numpy_helper

    import edgecnn

    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    path = folder / "light_squeezenet.onnx"
    expected = numpy_helper.to_array(onnx.load_tensor(str(folder / "light_squeezenet_output_0.pb")))
    n = 3 * 224 * 224
    feed = (np.arange(n).reshape(1, 3, 224, 224) / n).astype(np.float32)  # the suite's dummy input
    lines = [
        "| kernels | threads | distinct softmax values | max abs error vs expected | latency (ms) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, enabled in (("ordinary (shared_filters left out)", False), ("with shared_filters", True)):
        with shared_filters(enabled):
            for threads in (1, 2):
                model = edgecnn.load(path, threads=threads)
                out = model(feed)
                ms = best_ms(budget, model, feed)
                error = np.abs(out - expected).max()
                lines.append(f"| {label} | {threads} | {len(np.unique(out))} | {error:.4g} | {ms:.2f} |")
    return lines


def randomized(model: Any, seed: int) -> Any:
    """The light-zoo ONNX model with every ConstantOfShape weight replaced by random values (He-scaled
    normal for filters and matrices, uniform [0.5, 1.5) for vectors such as biases and batch-norm
    parameters): a network without repeated rows, like a trained one."""
    from onnx import numpy_helper

    rng = np.random.default_rng(seed)
    shapes = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    kept = []
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in shapes:
            kept.append(node)
            continue
        shape = tuple(int(d) for d in shapes[node.input[0]])
        if len(shape) >= 2:
            fan_in = int(np.prod(shape[1:]))
            value = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        else:
            value = rng.uniform(0.5, 1.5, shape)
        model.graph.initializer.append(numpy_helper.from_array(value.astype(np.float32), node.output[0]))
    del model.graph.node[:]
    model.graph.node.extend(kept)
    return model


def zoo_cost(budget: float) -> list[str]:
    import onnx

    from edgecnn.importers.onnx.reader import graph_from_model_proto
    from edgecnn.model import Model
    from edgecnn.runtime.options import RuntimeOptions

    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    lines = [
        "| model (random weights) | kernels | plan (ms) | latency, 2 threads (ms) | same kernels | same output |",
        "|---|---|---:|---:|---|---|",
    ]
    feed = np.random.default_rng(3).random((1, 3, 224, 224), dtype=np.float32)
    for name in ("squeezenet", "inception_v1", "resnet50"):
        graph = graph_from_model_proto(randomized(onnx.load(str(folder / f"light_{name}.onnx")), 0), name)
        results: dict[str, tuple[list[str], np.ndarray]] = {}
        for label, enabled in (("warm-up", False), ("ordinary", False), ("with rowstable", True)):
            with shared_filters(enabled):
                plan_ms = []
                for _ in range(3):
                    model = Model(graph, RuntimeOptions.resolve(threads=2))
                    start = time.perf_counter()
                    plan = model.plan_for(feed)
                    plan_ms.append((time.perf_counter() - start) * 1e3)
                kernels = [step.kernel.name for step in plan.steps]
                out = model(feed)
                ms = best_ms(budget, model, feed) if label != "warm-up" else 0.0
            results[label] = (kernels, out)
            if label == "warm-up":  # compiles and caches what the first plan needs; not reported
                continue
            same_kernels = kernels == results["ordinary"][0]
            same_out = np.array_equal(out, results["ordinary"][1])
            lines.append(
                f"| {name} | {label} | {min(plan_ms):.1f} | {ms:.2f} | {'yes' if same_kernels else 'NO'} "
                f"| {'yes' if same_out else 'NO'} |"
            )
    return lines


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what platform reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/rowstable.md"))
    parser.add_argument("--budget", type=float, default=0.5, help="seconds of repeats per timing")
    args = parser.parse_args()
    blas = next((lib for lib in threadpool_info() if lib.get("user_api") == "blas"), {})
    load_before = os.getloadavg()
    sections = [
        ("Distinct output rows when every weight row is 0.02 (inputs uniform in [0, 1e6))", row_classes),
        ("One thread: OpenBLAS sgemm vs row-invariant alternatives (random data)", gemm_speed),
        ("Plan-time search for repeated filters, random (repeat-free) zoo-sized weights", detection_cost),
        ("The ONNX suite's light SqueezeNet end to end (expected: 0.001 everywhere)", light_squeezenet),
        ("Light-zoo graphs with random weights (no repeated rows): what the kernels cost there", zoo_cost),
    ]
    body = []
    for title, section in sections:
        body += [f"## {title}", "", *section(args.budget), ""]
    load_after = os.getloadavg()
    header = [
        "# Output-channel position invariance of the conv GEMMs",
        "",
        "Produced by `.venv/bin/python benchmarks/rowstable.py` (do not edit by hand; rerun it).",
        "",
        f"- Machine: {cpu_name()}, {os.cpu_count()} cores, "
        f"{platform.system()} {platform.release()}; Python {platform.python_version()}, numpy {np.__version__}, "
        f"BLAS {blas.get('internal_api', '?')} {blas.get('version', '?')} ({blas.get('architecture', '?')} kernels).",
        f"- Load average (1, 5, 15 min) before: {load_before[0]:.2f}, {load_before[1]:.2f}, {load_before[2]:.2f}; "
        f"after: {load_after[0]:.2f}, {load_after[1]:.2f}, {load_after[2]:.2f}. Times are the best of repeats.",
        "",
    ]
    text = "\n".join(header + body)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
