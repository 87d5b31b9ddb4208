"""Seed 001's operator micro-benchmark (chapter 3.1) on CUDA, beside the CPU and (where pyopencl finds
a device) OpenCL, at the seed's sizes: GEMM 512x1024 by 1024x512, im2col of a 100x256x256 input (3x3,
stride 1, no padding), 3x3 max-pool (stride 1) and ReLU on 100x256x256; then whole benchmark-zoo
models (batch 1) on ``cpu`` and ``cuda:0``.

CPU rows: numpy (BLAS for GEMM) and edgecnn's "cpu" backend (a one-node model). CUDA rows: the
backend's own kernels (edgecnn.kernels.cuda: cuBLAS through cupy.matmul, the im2col, max-pool and
activation kernels) on data already on the GPU, timed with CUDA events; "+ copies" adds the host
transfers in and out. OpenCL rows come from lab/opencl_ops.py's kernels (``--opencl DEVICE``).
Median and best of ``--repeat`` runs after ``--warmup`` runs. Models: median ms per inference from
host input to host output, activations resident on the GPU between layers.

    python lab/cuda_ops.py [--device cuda:0] [--opencl opencl:0] [--repeat 20] [--models]
        [--write-docs docs/heterogeneous.md]

``--write-docs`` replaces the text between the ``cuda_ops`` markers of that page with the tables.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from common import C, H, K, M, N, Row, W, markdown, one_node_model, timed
from edgecnn.devices import find_device, parse_device
from edgecnn.model import Model
from edgecnn.ops.conv import ConvAttrs, conv_geometry, im2col
from edgecnn.ops.pool import MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.runtime.options import RuntimeOptions

BEGIN, END = "<!-- cuda_ops:begin -->", "<!-- cuda_ops:end -->"
MODELS = "alexnet,googlenet,resnet18,resnet50,mobilenetv2,squeezenet1.1,shufflenetv2,vgg16,tiny-yolo,lenet5"


def event_timed(device: Any, fn: Callable[[], Any], warmup: int, repeat: int) -> list[float]:
    """GPU milliseconds of ``fn``'s launches, between two CUDA events."""
    cupy = device.cupy
    with device.cuda:
        for _ in range(warmup):
            fn()
        device.synchronize()
        times = []
        for _ in range(repeat):
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(float(cupy.cuda.get_elapsed_time(start, stop)))
    return times


def cuda_rows(device_name: str, warmup: int, repeat: int) -> list[Row]:
    from edgecnn.kernels.cuda import get_device

    device = get_device(parse_device(device_name).index)
    cupy = device.cupy
    rng = np.random.default_rng(0)
    rows: list[Row] = []

    a, b = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((K, N), dtype=np.float32)
    flops = 2.0 * M * N * K
    rows.append(Row("GEMM", "CPU", "numpy @ (BLAS)", timed(lambda: a @ b, warmup, repeat), flops, "GFLOP/s"))
    gemm_model = one_node_model("MatMul", NoAttrs(), a, {"b": b})
    rows.append(
        Row("GEMM", "CPU", "edgecnn cpu", timed(lambda: gemm_model(a), warmup, repeat), flops, "GFLOP/s")
    )
    da, db = device.upload(a), device.upload(b)
    gemm_time = event_timed(device, lambda: cupy.matmul(da, db), warmup, repeat)
    rows.append(Row("GEMM", "CUDA", "cuBLAS (cupy.matmul)", gemm_time, flops, "GFLOP/s"))
    np.testing.assert_allclose(cupy.matmul(da, db).get(), a @ b, rtol=1e-3, atol=1e-3 * np.sqrt(K))
    cuda_gemm = cuda_one_node("MatMul", NoAttrs(), a, {"b": b})
    rows.append(
        Row(
            "GEMM",
            "CUDA",
            "edgecnn cuda + copies",
            timed(lambda: cuda_gemm(a), warmup, repeat),
            flops,
            "GFLOP/s",
        )
    )

    x = rng.standard_normal((1, C, H, W), dtype=np.float32)
    geo = conv_geometry(ConvAttrs(), x.shape, (1, C, 3, 3))
    oh, ow = H - 2, W - 2
    moved = 4.0 * C * 9 * oh * ow + x.nbytes

    def numpy_im2col() -> np.ndarray:
        windows, _ = im2col(x, geo)  # (1, C, OH, OW, 3, 3) view
        return np.ascontiguousarray(windows[0].transpose(0, 3, 4, 1, 2)).reshape(C * 9, oh * ow)

    expected_cols = numpy_im2col()
    rows.append(
        Row(
            "im2col",
            "CPU",
            "numpy (strided view, copied)",
            timed(numpy_im2col, warmup, repeat),
            moved,
            "GB/s",
        )
    )
    dx = device.upload(x)
    cols = device.empty((C * 9, oh * ow))
    conv_args = tuple(np.int32(v) for v in (C, H, W, 1, 3, 3, 1, 1, 0, 0, 1, 1, oh, ow))

    def cuda_im2col() -> None:
        device.launch("im2col", C * 9 * oh * ow, dx, *conv_args, np.int32(0), cols)

    rows.append(Row("im2col", "CUDA", "kernel, one thread per element", event_timed(device, cuda_im2col, warmup, repeat), moved, "GB/s"))  # fmt: skip
    np.testing.assert_array_equal(cols.get(), expected_cols)

    pool_ops = 8.0 * C * oh * ow
    pool_model = one_node_model("MaxPool", MaxPoolAttrs(kernel_shape=(3, 3)), x, {})
    rows.append(Row("max-pool 3x3", "CPU", "edgecnn cpu", timed(lambda: pool_model(x), warmup, repeat), pool_ops, "GFLOP/s"))  # fmt: skip
    pooled = device.empty((1, C, oh, ow))
    pool_args = tuple(np.int32(v) for v in (H, W, oh, ow, 3, 3, 1, 1, 0, 0, 1, 1))

    def cuda_pool() -> None:
        device.launch("max_pool2d", C * oh * ow, dx, pooled, *pool_args)

    rows.append(Row("max-pool 3x3", "CUDA", "kernel, one thread per output", event_timed(device, cuda_pool, warmup, repeat), pool_ops, "GFLOP/s"))  # fmt: skip
    np.testing.assert_array_equal(pooled.get(), pool_model(x))

    relu_bytes = 2.0 * x.nbytes
    rows.append(Row("ReLU", "CPU", "numpy maximum", timed(lambda: np.maximum(x, 0), warmup, repeat), relu_bytes, "GB/s"))  # fmt: skip
    relu_model = one_node_model("Relu", NoAttrs(), x, {})
    rows.append(
        Row("ReLU", "CPU", "edgecnn cpu", timed(lambda: relu_model(x), warmup, repeat), relu_bytes, "GB/s")
    )
    relu_out = device.empty(x.shape)
    relu = (np.int32(1), np.float32(0), np.float32(-np.inf), np.float32(np.inf))

    def cuda_relu() -> None:
        device.launch("activation", x.size, dx, relu_out, *relu)

    rows.append(
        Row("ReLU", "CUDA", "kernel", event_timed(device, cuda_relu, warmup, repeat), relu_bytes, "GB/s")
    )

    def relu_with_copies() -> np.ndarray:
        inp, out = device.upload(x), device.empty(x.shape)
        device.launch("activation", x.size, inp, out, *relu)
        return out.get()

    rows.append(
        Row("ReLU", "CUDA", "kernel + copies", timed(relu_with_copies, warmup, repeat), relu_bytes, "GB/s")
    )
    np.testing.assert_array_equal(relu_out.get(), np.maximum(x, 0))
    return rows


def cuda_one_node(op: str, attrs: Any, x: np.ndarray, constants: dict[str, np.ndarray]) -> Model:
    """The one-node CPU benchmark model, planned for "cuda" instead."""
    cpu = one_node_model(op, attrs, x, constants)
    return Model(cpu.graph, RuntimeOptions.resolve(device="cuda", optimize=False))


def opencl_rows(device_name: str, warmup: int, repeat: int) -> list[Row]:
    """The OpenCL kernel rows of lab/opencl_ops.py (its CPU rows are this script's own)."""
    from opencl_ops import benchmark

    return [r for r in benchmark(device_name, warmup, repeat) if r.where == "OpenCL"]


def ordered(rows: list[Row]) -> list[Row]:
    """Grouped by operator in the seed's order, CPU then OpenCL then CUDA within each."""
    ops = ["GEMM", "im2col", "max-pool 3x3", "ReLU"]
    places = ["CPU", "OpenCL", "CUDA"]
    return sorted(rows, key=lambda r: (ops.index(r.op), places.index(r.where)))


def host_and_gpu_ms(
    model: Model, x: np.ndarray, device_name: str, warmup: int, repeat: int
) -> tuple[float, float]:
    """Median (host ms, GPU ms) of one run with the input already on the GPU and no copy back: the
    host's time to launch every step, and the GPU's from the first launch to the last kernel's end
    (cupyx.profiler.benchmark). Equal times mean the GPU waited for the host."""
    from cupyx.profiler import benchmark as cupy_benchmark

    from edgecnn.kernels.cuda import CudaArray, get_device
    from edgecnn.runtime.executor import execute

    plan = model.plan_for(x)
    feeds = {model.inputs[0].name: CudaArray.upload(get_device(parse_device(device_name).index), x)}
    result = cupy_benchmark(lambda: execute(plan, feeds, []), n_repeat=repeat, n_warmup=warmup)
    return float(np.median(result.cpu_times)) * 1e3, float(np.median(result.gpu_times[0])) * 1e3


def models_table(device_name: str, names: list[str], warmup: int, repeat: int) -> str:
    """Median ms per inference (batch 1, full-size zoo models): CPU against CUDA."""
    import onnx

    import edgecnn
    from edgecnn.bench.zoo import build_model

    lines = [
        "| model (batch 1) | steps | CPU ms | CUDA ms | CPU / CUDA | CUDA host launch ms | CUDA GPU ms | max relative error |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    folder = tempfile.mkdtemp()
    for name in names:
        path = f"{folder}/{name}.onnx"
        onnx.save(build_model(name), path)
        cpu = edgecnn.load(path)
        gpu = edgecnn.load(path, device=device_name)
        spec = cpu.inputs[0]
        shape = tuple(d if isinstance(d, int) else 1 for d in spec.shape)  # type: ignore[union-attr]
        x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        expected = cpu(x)
        error = float(np.abs(gpu(x) - expected).max()) / float(np.abs(expected).max())
        steps = gpu.plan_for(x).steps
        fallbacks = sum(not s.kernel.name.startswith("cuda_") for s in steps)
        cpu_ms = statistics.median(timed(lambda cpu=cpu, x=x: cpu(x), warmup, repeat))
        gpu_ms = statistics.median(timed(lambda gpu=gpu, x=x: gpu(x), warmup, repeat))
        host, busy = host_and_gpu_ms(gpu, x, device_name, warmup, repeat)
        note = f" ({fallbacks} steps on the reference)" if fallbacks else ""
        lines.append(
            f"| {name}{note} | {len(steps)} | {cpu_ms:.2f} | {gpu_ms:.2f} | {cpu_ms / gpu_ms:.1f}x | {host:.2f} "
            f"| {busy:.2f} | {error:.1e} |"
        )
    return "\n".join(lines)


def machine(device_name: str, opencl: str | None) -> str:
    import cupy

    cpu = find_device("cpu")
    gpu = find_device(device_name)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        f"- CPU: {cpu.label} ({cpu.vendor}), {cpu.compute_units} cores available, "
        f"{cpu.memory_bytes / 2**30:.1f} GiB; {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}",
        f"- CUDA: {gpu.name} = {gpu.label}, {gpu.compute_units} SMs, {gpu.memory_bytes / 2**30:.1f} GiB, "
        f"{gpu.platform}, {gpu.version}, CuPy {cupy.__version__}",
    ]
    if opencl:
        dev = find_device(opencl)
        lines.append(f"- OpenCL: {dev.name} = {dev.label} ({dev.vendor}), {dev.platform}, {dev.version}")
    lines.append(f"- 1-minute load average when the run ended: {load:.2f}")
    return "\n".join(lines)


def write_docs(page: Path, text: str) -> None:
    """Replace the text between the cuda_ops markers of ``page``."""
    content = page.read_text(encoding="utf-8")
    start, stop = content.find(BEGIN), content.find(END)
    if start < 0 or stop < start:
        raise SystemExit(f"{page}: no {BEGIN} ... {END} markers to write between")
    page.write_text(content[: start + len(BEGIN)] + "\n" + text + content[stop:], encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--opencl", default=None, help="also time the OpenCL kernels on this device")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--models", action="store_true", help="also time whole zoo models (batch 1)")
    parser.add_argument("--model-names", default=MODELS)
    parser.add_argument("--write-docs", type=Path, help="write the tables between the markers of this page")
    args = parser.parse_args(argv)
    started = time.strftime("%Y-%m-%d", time.gmtime())
    rows = cuda_rows(args.device, args.warmup, args.repeat)
    if args.opencl:
        rows += opencl_rows(args.opencl, args.warmup, args.repeat)
    text = markdown(ordered(rows), args.repeat)
    if args.models:
        names = [n for n in args.model_names.split(",") if n]
        text += "\n\n" + models_table(args.device, names, args.warmup, args.repeat)
    command = "python lab/cuda_ops.py " + " ".join(sys.argv[1:] if argv is None else argv)
    text = f"{text}\n\n{machine(args.device, args.opencl)}\n- run {started}; command: `{command.strip()}`\n"
    print(text)
    if args.write_docs:
        write_docs(args.write_docs, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
