"""The crossover densities of the sparse kernels (src/edgecnn/kernels/cpu/sparse/csr.py): for each
layer shape, the sparse kernel and the kernel the runtime would run otherwise are timed side by side (interleaved runs, median) on
weights pruned at random to densities 0.02..0.8; the crossover is where sparse stops being faster
(linear interpolation between the two measured densities around its last rise through 1). The
smallest crossover over a kernel's shapes is the one to store.

    .venv/bin/python lab/sparse_crossover.py            # prints and writes docs/compression.md
    .venv/bin/python lab/sparse_crossover.py --quick    # fewer densities and repeats
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

import edgecnn.kernels.cpu  # noqa: F401  (registers every CPU kernel)
from common import DOCS, machine_line, write_section
from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.sparse.steps import SparseConv, SparseGemm
from edgecnn.kernels.cpu.system.threads import cpu_threads, max_threads
from edgecnn.kernels.cpu.tuning_record import DEFAULT_CPU_TUNING
from edgecnn.kernels.registry import KernelEntry, candidate_kernels
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs

DENSITIES = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8)
QUICK_DENSITIES = (0.05, 0.15, 0.3, 0.5)


@dataclass(frozen=True)
class Shape:
    kernel: str  # "spmv", "spmm" or "conv": which constant it informs
    label: str
    build: Callable[[np.ndarray], tuple[Callable[[], object], Callable[[], object], str]]
    weight_shape: tuple[int, ...]


def dense_choice(node: Node, types: list[TensorType], values: list[np.ndarray | None]) -> KernelEntry:
    """The kernel the runtime would run without the sparse kernels: the first registered one, by
    priority, whose heuristic accepts the node (winograd for 3x3 convs, gemm_1x1, im2col_gemm...)."""
    for entry in candidate_kernels(node, types, values):
        if not entry.name.startswith("sparse") and (entry.when is None or entry.when(node, types, values)):
            return entry
    raise LookupError(f"no dense kernel for {node.name}")


def kernel_pair(
    node: Node, types: list[TensorType], w: np.ndarray, x: np.ndarray, sparse_kernel: Callable[..., object]
) -> tuple[Callable[[], object], Callable[[], object], str]:
    values: list[np.ndarray | None] = [None, w]
    entry = dense_choice(node, types, values)
    dense, sparse = entry.factory(node, types, values), sparse_kernel(node, types, values)
    return (lambda: dense(x)), (lambda: sparse(x)), entry.name


def gemm_shape(kernel: str, label: str, batch: int, k: int, n: int) -> Shape:
    def build(w: np.ndarray) -> tuple[Callable[[], object], Callable[[], object], str]:
        node = Node("Gemm", label, ["a", "w"], ["y"], GemmAttrs(trans_b=True))
        types = [TensorType("float32", (batch, k)), TensorType("float32", (n, k))]
        a = np.random.default_rng(1).standard_normal((batch, k), dtype=np.float32)
        return kernel_pair(node, types, w, a, SparseGemm)

    return Shape(kernel, label, build, (n, k))


def conv_shape(label: str, channels: int, size: int, out_channels: int, kernel: int, batch: int = 1) -> Shape:
    attrs = ConvAttrs(kernel_shape=(kernel, kernel), pads=(kernel // 2,) * 4)

    def build(w: np.ndarray) -> tuple[Callable[[], object], Callable[[], object], str]:
        node = Node("Conv", label, ["x", "w"], ["y"], attrs)
        x_shape = (batch, channels, size, size)
        types = [TensorType("float32", x_shape), TensorType("float32", w.shape)]
        x = np.random.default_rng(1).standard_normal(x_shape, dtype=np.float32)
        return kernel_pair(node, types, w, x, SparseConv)

    return Shape("conv", label, build, (out_channels, channels, kernel, kernel))


SHAPES = [
    gemm_shape("spmv", "FC 4096->4096, batch 1", 1, 4096, 4096),
    gemm_shape("spmv", "FC 9216->4096, batch 1", 1, 9216, 4096),
    gemm_shape("spmv", "FC 1024->1000, batch 1", 1, 1024, 1000),
    gemm_shape("spmm", "FC 4096->4096, batch 4", 4, 4096, 4096),
    gemm_shape("spmm", "FC 4096->4096, batch 16", 16, 4096, 4096),
    conv_shape("conv 256->384 3x3, 13x13 (AlexNet conv3)", 256, 13, 384, 3),
    conv_shape("conv 64->64 3x3, 56x56 (ResNet stage 1)", 64, 56, 64, 3),
    conv_shape("conv 256->64 1x1, 56x56", 256, 56, 64, 1),
]


def pruned(shape: tuple[int, ...], density: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(shape, dtype=np.float32)
    return w * (rng.random(shape) < density)


def interleaved_ms(
    first: Callable[[], object], second: Callable[[], object], repeats: int
) -> tuple[float, float]:
    """Medians of ``repeats`` alternating runs of each (after one warm-up each)."""
    first(), second()
    a, b = [], []
    for _ in range(repeats):
        for action, times in ((first, a), (second, b)):
            start = time.perf_counter()
            action()
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(a), statistics.median(b)


def crossover(densities: Sequence[float], ratios: Sequence[float]) -> float:
    """The density where sparse/dense time last rises through 1, interpolated linearly: the highest
    measured density at which sparse is faster, and the next one, at which it is not. Taking the
    last rise rather than the first makes one noisy point at a low density (a shared machine)
    not decide the result. 0 if sparse is never faster; the last density if it always is."""
    faster = [i for i, r in enumerate(ratios) if r < 1.0]
    if not faster:
        return 0.0
    i = faster[-1]
    if i == len(ratios) - 1:
        return densities[-1]
    (d0, r0), (d1, r1) = (densities[i], ratios[i]), (densities[i + 1], ratios[i + 1])
    return d0 + (1.0 - r0) * (d1 - d0) / (r1 - r0)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer densities and repeats")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=max_threads())
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    parser.add_argument(
        "--only", choices=("spmv", "spmm", "conv"), help="one kernel's shapes (implies --no-write)"
    )
    args = parser.parse_args()
    densities = QUICK_DENSITIES if args.quick else DENSITIES
    repeats = 3 if args.quick else args.repeats
    lines = [
        "| layer | " + " | ".join(f"{d:.0%}" for d in densities) + " | crossover |",
        "|---" * (len(densities) + 2) + "|",
    ]
    found: dict[str, list[float]] = {}
    with cpu_threads(args.threads):
        for shape in SHAPES:
            if args.only and shape.kernel != args.only:
                continue
            ratios, cells, dense_names = [], [], set()
            for density in densities:
                dense, sparse, dense_name = shape.build(pruned(shape.weight_shape, density))
                dense_names.add(dense_name)
                dense_ms, sparse_ms = interleaved_ms(dense, sparse, repeats)
                ratios.append(sparse_ms / dense_ms)
                cells.append(f"{sparse_ms:.2f} / {dense_ms:.2f}")
            point = crossover(densities, ratios)
            found.setdefault(shape.kernel, []).append(point)
            against = ", ".join(sorted(dense_names))
            lines.append(f"| {shape.label}, against {against} | " + " | ".join(cells) + f" | {point:.0%} |")
            print(lines[-1], flush=True)
    summary = [
        f"- `{k}_crossover`: measured {min(v):.2f} (smallest over its shapes); stored "
        f"{getattr(DEFAULT_CPU_TUNING, f'{k}_crossover'):.2f}"
        for k, v in found.items()
    ]
    body = "\n".join(
        [
            "### Sparse kernels: crossover density",
            "",
            "Each cell: sparse / dense milliseconds (median of interleaved runs) for a weight pruned at",
            "random to that density, *dense* being the kernel the runtime would otherwise choose (named in",
            "the first column); *crossover*: where the sparse/dense time ratio last rises through 1",
            "(interpolated).",
            machine_line(args.threads),
            "Command: `.venv/bin/python lab/sparse_crossover.py`" + (" --quick" if args.quick else "") + ".",
            "",
            *lines,
            "",
            "The `CpuTuning` defaults in `src/edgecnn/kernels/cpu/tuning_record.py` (the runtime chooses",
            "the sparse kernel below them):",
            "",
            *summary,
        ]
    )
    print("\n".join(summary))
    if not (args.no_write or args.only):
        write_section(
            DOCS / "compression.md", "sparse-crossover", body, before="## Not done yet (rest of issue 5)"
        )


if __name__ == "__main__":
    main()
