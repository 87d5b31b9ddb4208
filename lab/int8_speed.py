"""int8 against float32 and onnxruntime on issue 37's zoo models.

Each model (edgecnn.bench.zoo, seeded weights) is quantised by onnxruntime.quantization.quantize_static
(QDQ, per-channel s8 weights, u8 activations, min-max on a few seeded calibration inputs) after its
pre-processing (quant_pre_process: BatchNorm folded into the convolutions); then, at
batch 1 and ``--threads`` threads, interleaved (one run of each per round, medians):

- edgecnn float32 on the float model, edgecnn int8 on the QDQ model (fold_qdq makes its layers
  QLinearConv), onnxruntime on the QDQ model (and on the float model, for scale);
- per int8 convolution layer: the dot-product kernel (int8_dot_conv) against the widening one
  (int8_im2col_gemm), each built from the same planned node and timed alone;
- with ``--cpu-time``: the same interleaved runs timed by process CPU time (the processor time a
  run takes whatever else the machine runs; meaningful at 1 thread, where no worker spins);
- agreement: edgecnn's int8 output against onnxruntime's (max |difference|, equal or not) and the
  top-1 class of both int8 models against float32 on the timing inputs (lab/int8_eval.py measures
  agreement on a few hundred images);
- with ``--avx2``: the same in a child process whose numba compiles for an AVX2-only CPU (znver3:
  NUMBA_CPU_NAME/NUMBA_CPU_FEATURES, its own NUMBA_CACHE_DIR, so the shared cache is untouched),
  which checks that edgecnn then sees no VNNI and no 512-bit vectors; onnxruntime still uses the
  host's instructions there.

Ends with a markdown table of the medians and the machine line.

    .venv/bin/python lab/int8_speed.py --rounds 20                      # the six models, 2 threads, wall
    .venv/bin/python lab/int8_speed.py --rounds 20 --cpu-time --threads 1 [--avx2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from common import interleaved, machine_line, ort_options, time_steps

CALIBRATION = 4
"""Calibration inputs per model (seeded standard-normal images)."""
MODELS = ["resnet18", "resnet50", "mobilenetv2", "squeezenet1.1", "tiny-yolo", "googlenet"]
"""Issue 37's benchmark models (edgecnn bench --list names)."""
ZNVER3_FEATURES = ",".join(
    f"+{f}"
    for f in (
        "64bit", "adx", "aes", "avx", "avx2", "bmi", "bmi2", "clflushopt", "clwb", "clzero", "cx16",
        "f16c", "fma", "fsgsbase", "lzcnt", "movbe", "mwaitx", "pclmul", "pku", "popcnt", "prfchw",
        "rdpid", "rdrnd", "rdseed", "sha", "sse", "sse2", "sse3", "sse4.1", "sse4.2", "sse4a", "ssse3",
        "vaes", "vpclmulqdq", "wbnoinvd", "xsave", "xsavec", "xsaveopt", "xsaves",
    )
)  # fmt: skip
"""An AVX2-only EPYC's features (AMD Zen 3): AVX2 and FMA, no AVX-512, no VNNI."""
COLUMNS = ("edgecnn float32", "edgecnn int8", "onnxruntime int8", "onnxruntime float32")


def avx2_child() -> int:
    """This script again, its numba compiling for znver3 into a cache of its own; its exit status."""
    cache = Path(tempfile.gettempdir()) / "edgecnn-lab-numba-znver3"
    env = {**os.environ, "NUMBA_CPU_NAME": "znver3", "NUMBA_CPU_FEATURES": ZNVER3_FEATURES}
    env["NUMBA_CACHE_DIR"] = str(cache)
    argv = [a for a in sys.argv[1:] if a != "--avx2"]
    print(f"AVX2 child: NUMBA_CPU_NAME=znver3, NUMBA_CACHE_DIR={cache}", flush=True)
    return subprocess.run([sys.executable, __file__, *argv], env=env, check=False).returncode


def target_line() -> str:
    """What numba compiles edgecnn's int8 kernels for, and so which dot-product loop they take."""
    from edgecnn.bench.machine import compiled_features
    from edgecnn.kernels.cpu.int8.dot_kernel import available, has_vnni, wide_vectors

    name, isa = compiled_features()
    loop = "vpdpbusd" if has_vnni() else "vpmaddubsw/vpmaddwd (u8 x s8 where exact, else int16)"
    return (
        f"numba target: {name} ({', '.join(isa)}); AVX2 {available()}, VNNI {has_vnni()}, "
        f"512-bit {wide_vectors()}: dot-product loop {loop}"
    )


def summary(rows: list[tuple[str, dict[str, float], bool]], clock: str, threads: int, rounds: int) -> str:
    """The medians as a markdown table (ms, ``clock``) with the speed-ups and whether edgecnn's
    int8 output equalled onnxruntime's."""
    lines = [
        f"| model ({clock} ms, {threads} thread(s), median of {rounds}) | "
        + " | ".join(COLUMNS)
        + " | int8 / float32 speed-up | edgecnn / onnxruntime int8 | int8 output = onnxruntime's |",
        "|---|" + "---:|" * (len(COLUMNS) + 2) + "---|",
    ]
    for name, ms, equal in rows:
        lines.append(
            f"| {name} | "
            + " | ".join(f"{ms[c]:.2f}" for c in COLUMNS)
            + f" | {ms['edgecnn float32'] / ms['edgecnn int8']:.2f}x"
            + f" | {ms['edgecnn int8'] / ms['onnxruntime int8']:.2f}x | {'yes' if equal else 'no'} |"
        )
    return "\n".join(lines)


def quantized(
    float_path: Path, folder: Path, samples: list[np.ndarray], name: str, reduce_range: bool = False
) -> Path:
    """The QDQ model onnxruntime's quantize_static writes (per-channel weights, its defaults else;
    ``reduce_range``: 7-bit weights)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter({name: x} for x in samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = folder / f"{float_path.stem}.prepared.onnx"
    quant_pre_process(str(float_path), str(prepared), skip_symbolic_shape=True)  # BatchNorm folded
    out = folder / f"{float_path.stem}.qdq{'7' if reduce_range else ''}.onnx"
    quantize_static(
        str(prepared),
        str(out),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=reduce_range,
    )
    return out


def layer_ab(net: Any, x: np.ndarray, rounds: int) -> list[tuple[str, str, float, float]]:
    """(layer, dot loop, widening ms, dot ms) of each int8 convolution of ``net``'s plan."""
    from edgecnn.kernels.cpu.int8.dot_conv import Int8DotConvKernel, when_dot_conv
    from edgecnn.kernels.cpu.int8.dot_kernel import has_vnni
    from edgecnn.kernels.cpu.int8.steps import Int8ConvKernel

    plan = net.plan_for({net.graph.input_names[0]: x})
    inputs: dict[str, np.ndarray] = {}
    wanted = [s.node.inputs[0] for s in plan.steps if s.node.op == "QLinearConv"]
    inputs = net.run({net.graph.input_names[0]: x}, outputs=wanted)
    rows = []
    for step in plan.steps:
        node = step.node
        if node.op != "QLinearConv":
            continue
        types = [plan.types.get(i) if i else None for i in node.inputs]
        values = [plan.constants.get(i) if i else None for i in node.inputs]
        if not when_dot_conv(node, types, values):
            continue
        dot, widening = Int8DotConvKernel(node, types, values), Int8ConvKernel(node, types, values)
        data = inputs[node.inputs[0]]
        a, b = np.empty(dot.out_shape, dot.out_dtype), np.empty(dot.out_shape, dot.out_dtype)
        medians = interleaved(
            {"widening": partial(widening.run_into, a, data), "dot": partial(dot.run_into, b, data)}, rounds
        )
        assert np.array_equal(a, b), node.name
        loop = ("vnni" if has_vnni() else "u8s8") if dot.bytes_mode else "s16"
        rows.append((node.name, loop, medians["widening"], medians["dot"]))
    return rows


def loop_census(net: Any, feed: dict[str, np.ndarray]) -> str:
    """Which loop each dot-product convolution takes, and the share of weight pairs (in the u8 x s8
    packing) whose int16 sum could saturate."""
    from edgecnn.kernels.cpu.int8.dot_conv import Int8DotConvKernel
    from edgecnn.kernels.cpu.int8.dot_gemm import tap_weights

    plan = net.plan_for(feed)
    layers = bytes_layers = pairs = unsafe = 0
    for step in plan.steps:
        if step.kernel.name != "int8_dot_conv":
            continue
        node = step.node
        values = [plan.constants.get(i) if i else None for i in node.inputs]
        kernel = Int8DotConvKernel(node, [plan.types.get(i) if i else None for i in node.inputs], values)
        w = values[3]
        assert w is not None
        matrix = tap_weights(w, 4).astype(np.int32)  # every layer reads the image by taps
        if matrix.shape[1] % 2:
            matrix = np.pad(matrix, ((0, 0), (0, 1)))
        pair = matrix.reshape(matrix.shape[0], -1, 2)
        over = (np.maximum(pair, 0).sum(axis=2) > 128) | (np.maximum(-pair, 0).sum(axis=2) > 128)
        layers, bytes_layers = layers + 1, bytes_layers + kernel.bytes_mode
        pairs, unsafe = pairs + over.size, unsafe + int(over.sum())
    share = 100 * unsafe / max(pairs, 1)
    return f"{bytes_layers} of {layers} convolutions on the u8 x s8 loop; {share:.2f}% of weight pairs could saturate"


def cpu_interleaved(timers: dict[str, Any], rounds: int) -> dict[str, float]:
    """Median process CPU ms of each timer, one call of each per round (one warm-up call each)."""
    for fn in timers.values():
        fn()
    samples: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(rounds):
        for name, fn in timers.items():
            start = time.process_time()
            fn()
            samples[name].append((time.process_time() - start) * 1e3)
    return {name: float(np.median(values)) for name, values in samples.items()}


def by_kernel(net: Any, feed: dict[str, np.ndarray], rounds: int) -> str:
    """Each kernel's share of a run: the median wall time of each of its steps, summed."""
    samples = time_steps(net)
    for _ in range(rounds):
        net.run(feed)
    totals: dict[str, float] = {}
    for label, times in samples.items():
        kernel = label[label.rindex("(") + 1 : -1]
        totals[kernel] = totals.get(kernel, 0.0) + 1e3 * float(np.median([wall for wall, _ in times]))
    return ", ".join(f"{k} {v:.2f}" for k, v in sorted(totals.items(), key=lambda kv: -kv[1]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--layers", action="store_true", help="also time each int8 convolution both ways")
    parser.add_argument("--profile", action="store_true", help="also sum each model's step times by kernel")
    parser.add_argument("--cpu-time", action="store_true", help="time by process CPU time, not wall")
    parser.add_argument(
        "--reduce-range", action="store_true", help="7-bit weights (quantize_static's reduce_range)"
    )
    parser.add_argument(
        "--avx2", action="store_true", help="run in a child whose numba compiles for an AVX2-only CPU"
    )
    args = parser.parse_args()
    if args.avx2:
        sys.exit(avx2_child())

    import onnxruntime as ort

    import edgecnn
    from edgecnn.bench.zoo import default_cache_dir, model_path

    print(machine_line(args.threads))
    print(target_line())
    if os.environ.get("NUMBA_CPU_NAME") == "znver3":
        from edgecnn.kernels.cpu.int8.dot_kernel import has_vnni, wide_vectors

        assert not has_vnni() and not wide_vectors(), "the AVX2 child still compiles for VNNI/AVX-512"
    rows: list[tuple[str, dict[str, float], bool]] = []
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            float_path = model_path(name, default_cache_dir())
            model = onnx.load(str(float_path))
            input_name = model.graph.input[0].name
            shape = [d.dim_value or 1 for d in model.graph.input[0].type.tensor_type.shape.dim]
            samples = [rng.standard_normal(shape).astype(np.float32) for _ in range(CALIBRATION)]
            started = time.perf_counter()
            qdq_path = quantized(float_path, Path(tmp), samples, input_name, args.reduce_range)
            print(f"\n{name}: quantised in {time.perf_counter() - started:.1f} s")
            x = rng.standard_normal(shape).astype(np.float32)
            feed = {input_name: x}
            net32 = edgecnn.load(str(float_path), threads=args.threads)
            net8 = edgecnn.load(str(qdq_path), threads=args.threads)
            ort8 = ort.InferenceSession(
                str(qdq_path), ort_options(args.threads), providers=["CPUExecutionProvider"]
            )
            ort32 = ort.InferenceSession(
                str(float_path), ort_options(args.threads), providers=["CPUExecutionProvider"]
            )
            plan = net8.plan_for(feed)
            kernels: dict[str, int] = {}
            for step in plan.steps:
                kernels[f"{step.node.op}:{step.kernel.name}"] = (
                    kernels.get(f"{step.node.op}:{step.kernel.name}", 0) + 1
                )
            print("int8 plan:", ", ".join(f"{k} x{v}" for k, v in sorted(kernels.items())))
            print("loops:", loop_census(net8, feed))
            y8 = next(iter(net8.run(feed).values()))
            (o8,) = ort8.run(None, feed)
            y32 = next(iter(net32.run(feed).values()))
            equal = bool(np.array_equal(y8, o8))
            print(
                f"edgecnn int8 vs onnxruntime int8: max |diff| {np.abs(y8 - o8).max():.3g}, "
                f"equal {np.array_equal(y8, o8)}; top-1 float32 {int(np.argmax(y32))}, "
                f"edgecnn int8 {int(np.argmax(y8))}, onnxruntime int8 {int(np.argmax(o8))}"
            )
            timers: dict[str, Callable[[], object]] = {
                "edgecnn float32": partial(net32.run, feed),
                "edgecnn int8": partial(net8.run, feed),
                "onnxruntime int8": partial(ort8.run, None, feed),
                "onnxruntime float32": partial(ort32.run, None, feed),
            }
            medians = (
                cpu_interleaved(timers, args.rounds) if args.cpu_time else interleaved(timers, args.rounds)
            )
            clock = "CPU" if args.cpu_time else "wall"
            rows.append((name, medians, equal))
            for label, ms in medians.items():
                print(f"  {label:20s} {ms:8.2f} ms ({clock}, median of {args.rounds})")
            print(
                f"  int8 speed-up over edgecnn float32: {medians['edgecnn float32'] / medians['edgecnn int8']:.2f}x; "
                f"edgecnn int8 / onnxruntime int8: {medians['edgecnn int8'] / medians['onnxruntime int8']:.2f}x"
            )
            if args.profile:
                for label, net in (("float32", net32), ("int8", net8)):
                    print(
                        f"  {label} steps by kernel (median wall ms per run, summed):",
                        by_kernel(net, feed, args.rounds),
                    )
            if args.layers:
                layer_rows = layer_ab(net8, x, max(5, args.rounds // 2))
                for layer, loop, old, new in layer_rows:
                    print(
                        f"  {layer:40s} {loop:5s} widening {old:7.3f} ms  dot {new:7.3f} ms  {old / new:5.2f}x"
                    )
                old_total, new_total = sum(r[2] for r in layer_rows), sum(r[3] for r in layer_rows)
                print(
                    f"  conv layers in all: widening {old_total:.2f} ms, dot {new_total:.2f} ms ({old_total / new_total:.2f}x)"
                )
                print(
                    "  loops:",
                    statistics.multimode(r[1] for r in layer_rows),
                    f"({sum(r[1] != 's16' for r in layer_rows)} u8 x s8 of {len(layer_rows)})",
                )
    print()
    print(summary(rows, "CPU" if args.cpu_time else "wall", args.threads, args.rounds))
    print()
    print(machine_line(args.threads))
    print(target_line())


if __name__ == "__main__":
    main()
