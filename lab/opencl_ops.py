"""Seed 001's operator micro-benchmark (chapter 3.1), CPU against OpenCL, at the seed's sizes:
GEMM 512x1024 by 1024x512 (the three OpenCL variants), im2col of a 100x256x256 input (3x3, stride 1,
no padding), 3x3 max-pool (stride 1) and ReLU on 100x256x256.

CPU rows: numpy (BLAS for GEMM) and edgecnn's "cpu" backend (a one-node model, whatever kernel the
registry picks). OpenCL rows: the kernel alone on data already on the device (enqueue to finish), for
each GEMM variant (the seed's scalar, float4 and tiled, and a register-blocked one) and for both forms
of im2col and max-pool (one work item per output element, or per output row); for the GEMM variant
the size rule picks and for ReLU also with the host copies in and out. Prints a markdown table
with the median and best of ``--repeat`` runs after ``--warmup`` runs, and the machine.

With ``--models``, also whole benchmark-zoo models: CPU against OpenCL (activations resident on the
device between steps).

    .venv/bin/python lab/opencl_ops.py [--device opencl:0] [--repeat 10] [--models] [--output FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from typing import Any

import numpy as np

from common import C, H, K, M, N, Row, W, markdown, one_node_model, timed
from edgecnn.devices import find_device, parse_device
from edgecnn.kernels.opencl import DeviceArray, get_device
from edgecnn.kernels.opencl.gemm import VARIANTS, Operand, choose_variant, enqueue_gemm
from edgecnn.ops.conv import ConvAttrs, conv_geometry, im2col
from edgecnn.ops.pool import MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs


def b_operand(device: Any, b: np.ndarray, variant: str) -> tuple[DeviceArray, Operand]:
    """B uploaded in the layout the variant reads (as dense.packed_weights packs constant weights)."""
    from edgecnn.kernels.opencl.dense import packed_weights

    return packed_weights(device, b, False, variant)


def benchmark(device_name: str, warmup: int, repeat: int) -> list[Row]:
    rng = np.random.default_rng(0)
    device = get_device(parse_device(device_name).index)
    sync = device.finish
    rows: list[Row] = []

    # GEMM 512x1024 @ 1024x512
    a, b = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((K, N), dtype=np.float32)
    flops = 2.0 * M * N * K
    rows.append(Row("GEMM", "CPU", "numpy @ (BLAS)", timed(lambda: a @ b, warmup, repeat), flops, "GFLOP/s"))
    gemm_model = one_node_model("MatMul", NoAttrs(), a, {"b": b})
    rows.append(
        Row("GEMM", "CPU", "edgecnn cpu", timed(lambda: gemm_model(a), warmup, repeat), flops, "GFLOP/s")
    )
    da = DeviceArray.upload(device, a)
    packed = {variant: b_operand(device, b, variant) for variant in VARIANTS}
    y = DeviceArray.empty(device, (M, N))
    for variant in VARIANTS:
        db, layout = packed[variant]  # each variant reads B as a plan packs constant weights for it

        def run(variant: str = variant, db: DeviceArray = db, layout: Operand = layout) -> None:
            enqueue_gemm(
                device, variant, M, N, K, 1, da.buffer, Operand.row_major(M, K), db.buffer, layout, y.buffer
            )

        rows.append(
            Row("GEMM", "OpenCL", f"{variant} kernel", timed(run, warmup, repeat, sync), flops, "GFLOP/s")
        )
        np.testing.assert_allclose(y.get(), a @ b, rtol=1e-3, atol=1e-3 * np.sqrt(K), err_msg=variant)
    chosen = choose_variant(M, N, K, blockable=True, cpu=device.is_cpu)
    db_chosen, layout_chosen = packed[chosen]

    def gemm_with_copies() -> np.ndarray:
        dx, out = DeviceArray.upload(device, a), DeviceArray.empty(device, (M, N))
        enqueue_gemm(
            device,
            chosen,
            M,
            N,
            K,
            1,
            dx.buffer,
            Operand.row_major(M, K),
            db_chosen.buffer,
            layout_chosen,
            out.buffer,
        )
        return out.get()

    rows.append(
        Row("GEMM", "OpenCL", f"{chosen} + copies", timed(gemm_with_copies, warmup, repeat), flops, "GFLOP/s")
    )

    # im2col of 100x256x256, 3x3, stride 1, no padding: (900, 254*254) columns
    x = rng.standard_normal((1, C, H, W), dtype=np.float32)
    geo = conv_geometry(ConvAttrs(), x.shape, (1, C, 3, 3))
    oh, ow = H - 2, W - 2
    cols_bytes = 4.0 * C * 9 * oh * ow
    moved = cols_bytes + x.nbytes

    def numpy_im2col() -> np.ndarray:
        windows, _ = im2col(x, geo)  # (1, C, OH, OW, 3, 3) view
        return np.ascontiguousarray(windows[0].transpose(0, 3, 4, 1, 2)).reshape(C * 9, oh * ow)

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
    dx = DeviceArray.upload(device, x)
    cols = DeviceArray.empty(device, (C * 9, oh * ow))
    geometry = tuple(np.int32(v) for v in (C, H, W, 1, 3, 3, 1, 1, 0, 0, 1, 1, oh, ow))

    for form, kernel, items in (("rows", "im2col_rows", C * 9 * oh), ("elements", "im2col", C * 9 * oh * ow)):

        def opencl_im2col(kernel: str = kernel, items: int = items) -> None:
            strides = (np.int32(oh * ow),) if kernel == "im2col_rows" else (np.int32(oh * ow), np.int32(1))
            device.launch_1d(kernel, items, dx.buffer, *geometry, np.int32(0), cols.buffer, *strides,
                             np.int32(C * 9 * oh * ow))  # fmt: skip

        rows.append(
            Row(
                "im2col",
                "OpenCL",
                f"kernel, one work item per {form[:-1]}",
                timed(opencl_im2col, warmup, repeat, sync),
                moved,
                "GB/s",
            )
        )
        np.testing.assert_array_equal(cols.get(), numpy_im2col())

    # 3x3 max-pool, stride 1, no padding; 8 comparisons per output
    pool_ops = 8.0 * C * oh * ow
    pool_attrs = MaxPoolAttrs(kernel_shape=(3, 3))
    pool_model = one_node_model("MaxPool", pool_attrs, x, {})
    rows.append(
        Row(
            "max-pool 3x3",
            "CPU",
            "edgecnn cpu",
            timed(lambda: pool_model(x), warmup, repeat),
            pool_ops,
            "GFLOP/s",
        )
    )
    pooled = DeviceArray.empty(device, (1, C, oh, ow))
    pool_geometry = tuple(np.int32(v) for v in (H, W, oh, ow, 3, 3, 1, 1, 0, 0, 1, 1))

    expected_pool = pool_model(x)
    for form, kernel, items in (("row", "max_pool2d_rows", C * oh), ("element", "max_pool2d", C * oh * ow)):

        def opencl_pool(kernel: str = kernel, items: int = items) -> None:
            device.launch_1d(kernel, items, dx.buffer, pooled.buffer, *pool_geometry)

        rows.append(
            Row(
                "max-pool 3x3",
                "OpenCL",
                f"kernel, one work item per {form}",
                timed(opencl_pool, warmup, repeat, sync),
                pool_ops,
                "GFLOP/s",
            )
        )
        np.testing.assert_array_equal(pooled.get(), expected_pool)

    # ReLU on 100x256x256: bytes read + written
    relu_bytes = 2.0 * x.nbytes
    rows.append(
        Row(
            "ReLU",
            "CPU",
            "numpy maximum",
            timed(lambda: np.maximum(x, 0), warmup, repeat),
            relu_bytes,
            "GB/s",
        )
    )
    relu_model = one_node_model("Relu", NoAttrs(), x, {})
    rows.append(
        Row("ReLU", "CPU", "edgecnn cpu", timed(lambda: relu_model(x), warmup, repeat), relu_bytes, "GB/s")
    )
    relu_out = DeviceArray.empty(device, x.shape)
    zero = np.float32(0)

    def opencl_relu() -> None:
        device.launch_1d("act_relu", x.size, dx.buffer, relu_out.buffer, zero, zero, zero)

    rows.append(Row("ReLU", "OpenCL", "kernel", timed(opencl_relu, warmup, repeat, sync), relu_bytes, "GB/s"))

    def relu_with_copies() -> np.ndarray:
        inp, out = DeviceArray.upload(device, x), DeviceArray.empty(device, x.shape)
        device.launch_1d("act_relu", x.size, inp.buffer, out.buffer, zero, zero, zero)
        return out.get()

    rows.append(
        Row("ReLU", "OpenCL", "kernel + copies", timed(relu_with_copies, warmup, repeat), relu_bytes, "GB/s")
    )
    np.testing.assert_array_equal(relu_out.get(), np.maximum(x, 0))
    return rows


def models_table(device_name: str, names: list[str], width: float, warmup: int, repeat: int) -> str:
    """Median ms per inference (batch 1) of zoo models: CPU against OpenCL (activations stay on the
    device between steps; copies only at the model's edges)."""
    import tempfile

    import onnx

    import edgecnn
    from edgecnn.bench.zoo import build_model

    lines = ["| model | CPU ms | OpenCL ms | max relative error |", "| --- | ---: | ---: | ---: |"]
    folder = tempfile.mkdtemp()
    for name in names:
        path = f"{folder}/{name}.onnx"
        onnx.save(build_model(name, width=width), path)
        cpu = edgecnn.load(path)
        ocl = edgecnn.load(path, device=device_name)
        spec = cpu.inputs[0]
        x = np.random.default_rng(0).standard_normal(
            tuple(d if isinstance(d, int) else 1 for d in spec.shape), dtype=np.float32
        )  # type: ignore[union-attr]
        expected = cpu(x)
        error = float(np.abs(ocl(x) - expected).max()) / float(np.abs(expected).max())
        times = [statistics.median(timed(lambda m=m, x=x: m(x), warmup, repeat)) for m in (cpu, ocl)]
        lines.append(f"| {name} | {times[0]:.2f} | {times[1]:.2f} | {error:.1e} |")
    return "\n".join(lines)


def machine(device_name: str) -> str:
    cpu = find_device("cpu")
    dev = find_device(device_name)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"- CPU: {cpu.label} ({cpu.vendor}), {cpu.compute_units} cores available, {cpu.memory_bytes / 2**30:.1f} GiB; "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}, numpy {np.__version__}\n"
        f"- OpenCL: {dev.name} = {dev.label} ({dev.vendor}), {dev.compute_units} compute units, "
        f"{dev.platform}, {dev.version}\n"
        f"- 1-minute load average when the run ended: {load:.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="opencl:0")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--models", action="store_true", help="also time whole zoo models (batch 1)")
    parser.add_argument(
        "--model-names", default="alexnet,googlenet,resnet18,mobilenetv2,squeezenet1.1,lenet5"
    )
    parser.add_argument("--width", type=float, default=1.0, help="channel multiplier of the zoo models")
    parser.add_argument("--output", help="also write the table and machine to this file")
    args = parser.parse_args(argv)
    rows = benchmark(args.device, args.warmup, args.repeat)
    text = markdown(rows, args.repeat)
    if args.models:
        names = [n for n in args.model_names.split(",") if n]
        text += "\n\n" + models_table(args.device, names, args.width, args.warmup, args.repeat)
    command = "python lab/opencl_ops.py " + " ".join(sys.argv[1:] if argv is None else argv)
    text = f"{text}\n\n{machine(args.device)}\n- command: `{command.strip()}`\n"
    print(text)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
