"""The compiled Transpose against numpy's np.copyto of the transposed view, on the zoo's shapes
(ConvNeXt-Tiny's NCHW<->NHWC, ShuffleNetV2's channel shuffle, YOLOv8n's DFL head), batch 1 and 8,
one and two threads, interleaved call by call.

    .venv/bin/python lab/transpose_ab.py --rounds 200
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from common import machine_line
from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.kernels.cpu.transpose import Transpose
from edgecnn.ops.shape import TransposeAttrs

NHWC, NCHW, SHUFFLE, HEAD = (0, 2, 3, 1), (0, 3, 1, 2), (0, 2, 1, 3, 4), (0, 2, 1, 3)
CASES = [
    ("convnext s1 to NHWC", (96, 56, 56), NHWC),
    ("convnext s1 to NCHW", (56, 56, 96), NCHW),
    ("convnext s2 to NHWC", (192, 28, 28), NHWC),
    ("convnext s3 to NHWC", (384, 14, 14), NHWC),
    ("convnext s3 to NCHW", (14, 14, 384), NCHW),
    ("convnext s4 to NHWC", (768, 7, 7), NHWC),
    ("shufflenet 116", (2, 58, 28, 28), SHUFFLE),
    ("shufflenet 232", (2, 116, 14, 14), SHUFFLE),
    ("shufflenet 464", (2, 232, 7, 7), SHUFFLE),
    ("yolov8n head", (4, 16, 8400), HEAD),
]


def measure(batch: int, threads: int, rounds: int) -> list[str]:
    rows = []
    for label, dims, perm in CASES:
        x = np.random.default_rng(0).standard_normal((batch, *dims)).astype(np.float32)
        kernel = Transpose(
            Node("Transpose", "t", ["x"], ["y"], TransposeAttrs(perm)),
            [TensorType("float32", x.shape)],
            [None],
        )
        ours = np.empty(kernel.out_shape, np.float32)
        theirs = np.empty(kernel.out_shape, np.float32)
        samples: dict[str, list[float]] = {"numpy": [], "compiled": []}
        with cpu_threads(threads):
            kernel.run_into(ours, x)
            np.copyto(theirs, x.transpose(perm))
            assert np.array_equal(ours, theirs), label
            for _ in range(rounds):
                for name in samples:
                    start = time.perf_counter()
                    if name == "numpy":
                        np.copyto(theirs, x.transpose(perm))
                    else:
                        kernel.run_into(ours, x)
                    samples[name].append((time.perf_counter() - start) * 1e6)
        med = {n: statistics.median(s) for n, s in samples.items()}
        iqr = {n: np.subtract(*np.percentile(s, [75, 25])) / med[n] for n, s in samples.items()}
        rows.append(
            f"| {label} | {batch} | {threads} | {kernel.kind} | {med['numpy']:.1f} ({100 * iqr['numpy']:.0f}%) | "
            f"{med['compiled']:.1f} ({100 * iqr['compiled']:.0f}%) | {med['compiled'] / med['numpy']:.2f} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    print(machine_line())
    print("| case | batch | threads | loop | numpy us (IQR) | compiled us (IQR) | compiled / numpy |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for batch in map(int, args.batches.split(",")):
        for threads in map(int, args.threads.split(",")):
            for row in measure(batch, threads, args.rounds):
                print(row, flush=True)


if __name__ == "__main__":
    main()
