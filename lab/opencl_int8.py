"""int8 models on OpenCL: a reduced ResNet-18 (zoo, width and resolution below), quantised by
onnxruntime's quantize_static (QDQ, per-channel, as lab/int8_speed.py does), run on ``opencl:0``
as int8 and as float32, and the int8 model on the CPU for reference: each plan's kernels per op,
the int8 outputs against the CPU int8 run, top-1 and max |difference| against float32, and the
median process CPU and wall time of each, interleaved (PoCL's worker threads belong to this process, so
their time counts; set POCL_MAX_PTHREAD_COUNT=1 for one thread, and OPENBLAS_NUM_THREADS=1: the
reference fallback's matmuls run in numpy, whose idle BLAS threads spin and inflate CPU time).

.venv/bin/python lab/opencl_int8.py [--width 0.25] [--resolution 64] [--rounds 8] [--opencl-only] [--gemm]
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from common import interleaved, machine_line
from int8_speed import cpu_interleaved, quantized

GEMM_SOURCE = r"""
/* The int8 twins of gemm_blocked (kernels/opencl/cl/gemm.cl): a 4 x 8 block of int32 sums per work
 * item, u8 B rows against s8 A rows. int8_rows: one k per step (uchar8 of B, 32 integer
 * multiply-adds); int8_char4: four k per step from B packed as [K/4][N][4] and A as [M][K/4][4], the
 * char4 x uchar4 dot products widened to int4. Inputs are centred by the caller's zero points. */
__kernel void int8_rows(const int M, const int N, const int K, __global const char *A,
                        __global const uchar *B, __global int *Y) {
    const int j = get_global_id(0) * 8, i = get_global_id(1) * 4;
    if (j >= N || i >= M) return;
    int8 acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
    for (int k = 0; k < K; ++k) {
        const int8 row = convert_int8(vload8(0, B + k * N + j));
        acc0 += (int)A[i * K + k] * row;
        acc1 += (int)A[(i + 1) * K + k] * row;
        acc2 += (int)A[(i + 2) * K + k] * row;
        acc3 += (int)A[(i + 3) * K + k] * row;
    }
    vstore8(acc0, 0, Y + i * N + j);
    vstore8(acc1, 0, Y + (i + 1) * N + j);
    vstore8(acc2, 0, Y + (i + 2) * N + j);
    vstore8(acc3, 0, Y + (i + 3) * N + j);
}

#define DOT4(a, b) ((a).x * (b).x + (a).y * (b).y + (a).z * (b).z + (a).w * (b).w)
__kernel void int8_char4(const int M, const int N, const int K, __global const char4 *A,
                         __global const uchar4 *B, __global int *Y) {
    const int j = get_global_id(0) * 8, i = get_global_id(1) * 4, K4 = K / 4;
    if (j >= N || i >= M) return;
    int acc[4][8] = {{0}};
    for (int q = 0; q < K4; ++q) {
        int4 b[8];
        for (int c = 0; c < 8; ++c) b[c] = convert_int4(B[q * N + j + c]);
        for (int r = 0; r < 4; ++r) {
            const int4 a = convert_int4(A[(i + r) * K4 + q]);
            for (int c = 0; c < 8; ++c) acc[r][c] += DOT4(a, b[c]);
        }
    }
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 8; ++c) Y[(i + r) * N + j + c] = acc[r][c];
}

__kernel void float_rows(const int M, const int N, const int K, __global const float *A,
                         __global const float *B, __global float *Y) {
    const int j = get_global_id(0) * 8, i = get_global_id(1) * 4;
    if (j >= N || i >= M) return;
    float8 acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
    for (int k = 0; k < K; ++k) {
        const float8 row = vload8(0, B + k * N + j);
        acc0 += A[i * K + k] * row;
        acc1 += A[(i + 1) * K + k] * row;
        acc2 += A[(i + 2) * K + k] * row;
        acc3 += A[(i + 3) * K + k] * row;
    }
    vstore8(acc0, 0, Y + i * N + j);
    vstore8(acc1, 0, Y + (i + 1) * N + j);
    vstore8(acc2, 0, Y + (i + 2) * N + j);
    vstore8(acc3, 0, Y + (i + 3) * N + j);
}
"""

GEMM_SHAPES = ((64, 256, 576), (128, 64, 1152), (256, 192, 2304))
"""(M, N, K) of 3x3 convolutions: the reduced ResNet-18's stages 2-3, and a full-size stage-4 layer
(N rounded to whole blocks of 8: the kernels here have no edge handling)."""


def gemm_table(rounds: int) -> None:
    """Process CPU ms of float32 and the two int8 GEMM forms on opencl:0, interleaved, the int8
    sums checked against numpy's."""
    import pyopencl as cl

    from edgecnn.kernels.opencl.runtime import get_device

    device = get_device(0)
    program = cl.Program(device.context, GEMM_SOURCE).build()
    kernels = {name: cl.Kernel(program, name) for name in ("float_rows", "int8_rows", "int8_char4")}
    queue, flags = device.queue, cl.mem_flags
    rng = np.random.default_rng(1)
    print("| M x N x K | float32 ms | int8 rows ms | int8 char4 ms | float32 / best int8 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for m, n, k in GEMM_SHAPES:
        a8 = rng.integers(-128, 128, (m, k), dtype=np.int8)
        b8 = rng.integers(0, 256, (k, n), dtype=np.uint8)
        packed = np.ascontiguousarray(b8.reshape(k // 4, 4, n).transpose(0, 2, 1))
        buffers = {
            name: cl.Buffer(device.context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=value)
            for name, value in (
                ("a8", a8), ("b8", b8), ("b4", packed),
                ("a32", a8.astype(np.float32)), ("b32", b8.astype(np.float32)),
            )
        }  # fmt: skip
        y = cl.Buffer(device.context, flags.WRITE_ONLY, m * n * 4)
        size = (n // 8, m // 4)
        dims = np.int32(m), np.int32(n), np.int32(k)
        runs = {
            "float32": (kernels["float_rows"], buffers["a32"], buffers["b32"]),
            "int8 rows": (kernels["int8_rows"], buffers["a8"], buffers["b8"]),
            "int8 char4": (kernels["int8_char4"], buffers["a8"], buffers["b4"]),
        }
        expected = a8.astype(np.int64) @ b8.astype(np.int64)
        for name, (kernel, a, b) in runs.items():
            kernel(queue, size, None, *dims, a, b, y)
            got = np.empty((m, n), np.float32 if name == "float32" else np.int32)
            cl.enqueue_copy(queue, got, y)
            # float32 sums are exact below 2**24 only: the float kernel is checked to float32 rounding
            close = (
                np.allclose(got, expected, rtol=1e-5) if name == "float32" else np.array_equal(got, expected)
            )
            assert close, f"{name} differs from numpy"

        def launch(kernel: Any, a: Any, b: Any, size: tuple[int, int], dims: tuple, y: Any) -> None:
            kernel(queue, size, None, *dims, a, b, y)
            queue.finish()

        ms = cpu_interleaved(
            {name: partial(launch, *run, size, dims, y) for name, run in runs.items()}, rounds
        )
        best = min(ms["int8 rows"], ms["int8 char4"])
        print(
            f"| {m} x {n} x {k} | {ms['float32']:.2f} | {ms['int8 rows']:.2f} | {ms['int8 char4']:.2f} "
            f"| {ms['float32'] / best:.2f}x |"
        )


def reference_fallback(path: Path) -> Any:
    """The int8 model on opencl:0 as it ran before passes/qdq_as_clip.py: folded to 8-bit
    ops, which have no OpenCL kernels and run on the numpy reference."""
    import edgecnn
    from edgecnn.model import Model

    class Folded(Model):
        def _for_device(self, graph: Any) -> Any:
            return graph

    converted = edgecnn.load(str(path), device="opencl:0", threads=1)
    return Folded(converted.graph, converted.options)


def census(net: Any, feed: dict[str, np.ndarray]) -> str:
    """``op:kernel xN`` for every step of the plan."""
    counts = Counter(f"{s.node.op}:{s.kernel.name}" for s in net.plan_for(feed).steps)
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--width", type=float, default=0.25)
    parser.add_argument("--resolution", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--images", type=int, default=32, help="inputs for top-1 agreement")
    parser.add_argument("--opencl-only", action="store_true", help="time the opencl:0 plans only")
    parser.add_argument("--gemm", action="store_true", help="only the float32 / int8 GEMM kernel table")
    args = parser.parse_args()
    if args.gemm:
        print(machine_line(1))
        gemm_table(args.rounds)
        return

    import onnx

    import edgecnn
    from edgecnn.bench.zoo import default_cache_dir, model_path

    print(machine_line(1))
    rng = np.random.default_rng(0)
    float_path = model_path(args.model, default_cache_dir(), width=args.width, resolution=args.resolution)
    model = onnx.load(str(float_path))
    name = model.graph.input[0].name
    shape = [d.dim_value or 1 for d in model.graph.input[0].type.tensor_type.shape.dim]
    with tempfile.TemporaryDirectory() as tmp:
        samples = [rng.standard_normal(shape).astype(np.float32) for _ in range(16)]
        qdq = quantized(float_path, Path(tmp), samples, name)
        nets = {
            "opencl float32": edgecnn.load(str(float_path), device="opencl:0", threads=1),
            "opencl int8 as float": edgecnn.load(str(qdq), device="opencl:0", threads=1),
            "opencl int8 fallback": reference_fallback(qdq),
            "cpu int8": edgecnn.load(str(qdq), threads=1),
            "cpu float32": edgecnn.load(str(float_path), threads=1),
        }
        x = rng.standard_normal(shape).astype(np.float32)
        feed = {name: x}
        for label, net in nets.items():
            print(f"{label} plan: {census(net, feed)}")
        outs: dict[str, list[np.ndarray]] = {label: [] for label in nets}
        for _ in range(args.images):
            f = {name: rng.standard_normal(shape).astype(np.float32)}
            for label, net in nets.items():
                outs[label].append(np.asarray(next(iter(net.run(f).values()))))
        ref32 = np.stack(outs["cpu float32"])
        ref8 = np.stack(outs["cpu int8"])
        for label in ("opencl int8 as float", "opencl int8 fallback", "opencl float32"):
            y = np.stack(outs[label])
            top1 = float(np.mean(y.argmax(-1) == ref8.argmax(-1)))
            print(
                f"{label} vs cpu int8 over {args.images} inputs: top-1 agreement {top1:.3f}, "
                f"max |diff| {np.abs(y - ref8).max():.4g}"
            )
        for label in ("opencl int8 as float", "opencl int8 fallback", "opencl float32", "cpu int8"):
            y = np.stack(outs[label])
            top1 = float(np.mean(y.argmax(-1) == ref32.argmax(-1)))
            print(
                f"{label} vs cpu float32 over {args.images} inputs: top-1 agreement {top1:.3f}, "
                f"max |diff| {np.abs(y - ref32).max():.4g} (output range {np.abs(ref32).max():.3g})"
            )
        timers = {
            label: partial(net.run, feed)
            for label, net in nets.items()
            if not (args.opencl_only and label.startswith("cpu"))
        }
        cpu = cpu_interleaved(timers, args.rounds)
        wall = interleaved(timers, args.rounds)
        print(f"median ms over {args.rounds} interleaved rounds, batch 1: process CPU, wall")
        for label in timers:
            print(f"  {label:22s} {cpu[label]:8.2f} {wall[label]:8.2f}")


if __name__ == "__main__":
    main()
