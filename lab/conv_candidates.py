"""Every compiled kernel that can run one convolution layer, timed warm side by side (issue 4).

The layer is given by its shape (input channels, output channels, map size, kernel, stride; batch
1, "same" padding, fused ReLU, seeded weights). Each candidate is prepared as `edgecnn tune`
prepares it, checked against the first one's output, then all are timed in turns, the medians of
``--calls`` calls per turn printed. A layer timed alone keeps its weights and input in cache: a
kernel rule still has to be checked on whole models (rule_ab.py, model_ab.py).

    .venv/bin/python lab/conv_candidates.py 512 128 28 1 1
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.kernels.registry import candidate_kernels
from edgecnn.ops.fused import FusedConvAttrs


def prepared(
    in_channels: int, out_channels: int, size: int, kernel: int, stride: int
) -> tuple[np.ndarray, dict[str, Callable[[np.ndarray], np.ndarray]]]:
    """The input and every candidate kernel's prepared callable for the layer."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((out_channels, in_channels, kernel, kernel), dtype=np.float32) * 0.05
    b = rng.standard_normal(out_channels, dtype=np.float32)
    x = rng.standard_normal((1, in_channels, size, size), dtype=np.float32)
    attrs = FusedConvAttrs(
        kernel_shape=(kernel, kernel), strides=(stride, stride), pads=(kernel // 2,) * 4, activation="relu"
    )
    node = Node("FusedConv", "conv", ["x", "w", "b"], ["y"], attrs)
    types = [TensorType("float32", x.shape), TensorType("float32", w.shape), TensorType("float32", b.shape)]
    values: list[np.ndarray | None] = [None, w, b]
    return x, {e.name: e.factory(node, types, values) for e in candidate_kernels(node, types, values)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for name in ("in_channels", "out_channels", "size", "kernel", "stride"):
        parser.add_argument(name, type=int)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--turns", type=int, default=2)
    args = parser.parse_args()
    with cpu_threads(args.threads):
        x, runs = prepared(args.in_channels, args.out_channels, args.size, args.kernel, args.stride)
        first = None
        for name, run in runs.items():
            y = run(x)
            first = y if first is None else first
            assert np.allclose(y, first, rtol=1e-4, atol=1e-4), f"{name} disagrees with the first candidate"
            for _ in range(5):
                run(x)
        for turn in range(args.turns):
            for name, run in runs.items():
                times = []
                for _ in range(args.calls):
                    start = time.perf_counter()
                    run(x)
                    times.append(time.perf_counter() - start)
                print(f"turn {turn + 1}  {name:14s} {np.median(times) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
