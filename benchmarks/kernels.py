"""Per-kernel timings: each fast CPU kernel against the numpy reference on layer shapes taken from
real networks, on 1 and 2 threads, plus the crossover where a second thread starts to pay
(the grain sizes in edgecnn.kernels.cpu.system.threads).

    .venv/bin/python benchmarks/kernels.py [--repeat 20] [--grain]
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu import cpu_threads
from edgecnn.kernels.registry import select_kernel
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import FusedConvAttrs, FusedGemmAttrs
from edgecnn.ops.norm import LRNAttrs
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs

rng = np.random.default_rng(0)


def tensor(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)


def layer(name: str, op: str, attrs: Any, inputs: list[np.ndarray], constants: int = 0) -> dict[str, Any]:
    """A node whose first ``len(inputs) - constants`` inputs are runtime tensors, the rest weights."""
    return {"name": name, "op": op, "attrs": attrs, "inputs": inputs, "constants": constants}


LAYERS = [
    layer(
        "conv 3x3 64->64 @56 (ResNet)",
        "FusedConv",
        FusedConvAttrs(pads=(1,) * 4, activation="relu"),
        [tensor(1, 64, 56, 56), tensor(64, 64, 3, 3), tensor(64)],
        2,
    ),
    layer(
        "conv 1x1 256->64 @56 (ResNet)",
        "FusedConv",
        FusedConvAttrs(activation="relu"),
        [tensor(1, 256, 56, 56), tensor(64, 256, 1, 1), tensor(64)],
        2,
    ),
    layer(
        "conv 11x11/4 3->96 (AlexNet conv1)",
        "FusedConv",
        FusedConvAttrs(strides=(4, 4), activation="relu"),
        [tensor(1, 3, 227, 227), tensor(96, 3, 11, 11), tensor(96)],
        2,
    ),
    layer(
        "conv 5x5 g2 96->256 @27 (AlexNet conv2)",
        "FusedConv",
        FusedConvAttrs(pads=(2,) * 4, group=2, activation="relu"),
        [tensor(1, 96, 27, 27), tensor(256, 48, 5, 5), tensor(256)],
        2,
    ),
    layer(
        "depthwise 3x3 144 @56 (MobileNetV2)",
        "FusedConv",
        FusedConvAttrs(pads=(1,) * 4, group=144, activation="clip", low=0.0, high=6.0),
        [tensor(1, 144, 56, 56), tensor(144, 1, 3, 3), tensor(144)],
        2,
    ),
    layer(
        "conv 3x3 3->16/2 @128 (face)",
        "Conv",
        ConvAttrs(strides=(2, 2), pads=(1,) * 4),
        [tensor(1, 3, 128, 128), tensor(16, 3, 3, 3), tensor(16)],
        2,
    ),
    layer(
        "maxpool 3x3/2 96 @55 (AlexNet)",
        "MaxPool",
        MaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2)),
        [tensor(1, 96, 55, 55)],
    ),
    layer(
        "maxpool 2x2/2 16 @64 (face)",
        "MaxPool",
        MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2)),
        [tensor(1, 16, 64, 64)],
    ),
    layer(
        "avgpool 3x3/1 pad 1 256 @28",
        "AveragePool",
        AveragePoolAttrs(kernel_shape=(3, 3), pads=(1,) * 4),
        [tensor(1, 256, 28, 28)],
    ),
    layer("global avgpool 1280 @7", "GlobalAveragePool", NoAttrs(), [tensor(1, 1280, 7, 7)]),
    layer(
        "fc 9216->4096 + relu (AlexNet fc6)",
        "FusedGemm",
        FusedGemmAttrs(trans_b=True, activation="relu"),
        [tensor(1, 9216), tensor(4096, 9216), tensor(4096)],
        2,
    ),
    layer(
        "fc 512->1000 batch 8",
        "Gemm",
        GemmAttrs(trans_b=True),
        [tensor(8, 512), tensor(1000, 512), tensor(1000)],
        2,
    ),
    layer("LRN 5 96 @55 (AlexNet norm1)", "LRN", LRNAttrs(size=5), [tensor(1, 96, 55, 55)]),
    layer("relu 96 @55", "Relu", NoAttrs(), [tensor(1, 96, 55, 55)]),
    layer("sigmoid 64 @56", "Sigmoid", NoAttrs(), [tensor(1, 64, 56, 56)]),
]


def prepare(spec: dict[str, Any], backend: str) -> tuple[str, Callable[[], Any]]:
    inputs = spec["inputs"]
    runtime = len(inputs) - spec["constants"]
    names = [f"in{i}" for i in range(len(inputs))]
    node = Node(spec["op"], "layer", names, ["out"], spec["attrs"])
    types = [TensorType("float32", tuple(x.shape)) for x in inputs]
    values = [None if i < runtime else x for i, x in enumerate(inputs)]
    choice = select_kernel(node, types, values, backend=backend)
    return choice.name, lambda: choice.run(*inputs)


def best_ms(run: Callable[[], Any], repeat: int) -> float:
    """Median of ``repeat`` timed calls after two warm-up calls (compilation excluded)."""
    run()
    run()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3)


def kernel_table(repeat: int) -> None:
    print(
        f"{'layer':44s} {'kernel':12s} {'reference':>10s} {'1 thread':>10s} {'2 threads':>10s} {'speed-up':>9s}"
    )
    for spec in LAYERS:
        _, reference = prepare(spec, "reference")
        name, fast = prepare(spec, "cpu")
        with cpu_threads(2):
            ref_ms = best_ms(reference, repeat)
        timings = []
        for threads in (1, 2):
            with cpu_threads(threads):
                timings.append(best_ms(fast, repeat))
        print(
            f"{spec['name']:44s} {name:12s} {ref_ms:10.3f} {timings[0]:10.3f} {timings[1]:10.3f}"
            f" {ref_ms / min(timings):8.1f}x"
        )


def grain_table(repeat: int) -> None:
    """Max pooling over growing inputs: where does the second thread start to pay?"""
    print("\nmax pool 2x2/2, 16 channels: work = outputs x taps; 1 vs 2 threads (ms)")
    from edgecnn.kernels.cpu.system import threads as budget

    saved = budget.GRAIN
    budget.GRAIN = 0  # let every size run parallel, to see what that costs
    try:
        for side in (8, 16, 24, 32, 48, 64, 96, 128):
            spec = layer(
                "", "MaxPool", MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2)), [tensor(1, 16, side, side)]
            )
            _, fast = prepare(spec, "cpu")
            work = 16 * (side // 2) ** 2 * 4
            with cpu_threads(1):
                one = best_ms(fast, repeat)
            with cpu_threads(2):
                two = best_ms(fast, repeat)
            print(f"  work {work:8d}: {one:.4f} vs {two:.4f} {'(2 threads faster)' if two < one else ''}")
    finally:
        budget.GRAIN = saved


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--grain", action="store_true", help="also measure the thread grain")
    args = parser.parse_args()
    print(f"{cpu_name()}; numba pool of {numba.config.NUMBA_NUM_THREADS}; times are medians in ms")
    kernel_table(args.repeat)
    if args.grain:
        grain_table(args.repeat)


if __name__ == "__main__":
    main()
