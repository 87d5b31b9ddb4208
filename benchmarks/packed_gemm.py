"""The micro-kernel's rate from L1 and the packed-weight GEMM against numpy's BLAS (issue 4).

1. microkernel.micro_kernel on one 6 x 16 block, depth 256, operands in L1, on 1 and 2 threads
   (each thread its own block): the FMA units' practical peak.
2. np.matmul on 1024^3 float32 with 1 and 2 BLAS threads: the BLAS library's best case.
3. packed_gemm.packed_gemm (weights packed beforehand, as at plan time) against single-threaded
   sgemm through the same binding the conv tiles use (blas.gemm_into), on ResNet-shaped products,
   one thread, interleaved.

Writes the section between the ``packed`` markers of docs/conv-gap.md (or prints with --print-only).

    .venv/bin/python benchmarks/packed_gemm.py
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np
from conv_gap import replace_section
from threadpoolctl import threadpool_limits

from edgecnn.bench.machine import cpu_model
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS, ROWS, micro_kernel
from edgecnn.kernels.cpu.gemm.packed_gemm import SCRATCH, pack_weights, packed_gemm
from edgecnn.kernels.cpu.system.blas import gemm_into

DOC = Path(__file__).resolve().parents[1] / "docs" / "conv-gap.md"
SHAPES = [
    (64, 147, 3136),
    (64, 576, 3136),
    (256, 64, 3136),
    (128, 1152, 196),
    (1024, 256, 196),
    (512, 4608, 49),
]
"""(M, K, N): ResNet's stem and 3x3 layer at 56x56 as im2col GEMMs, 1x1 expansions, small-map layers."""


@numba.njit(parallel=True, nogil=True)
def _blocks(depth: int, a: np.ndarray, b: np.ndarray, c: np.ndarray, repeats: int, count: int) -> None:
    for worker in numba.prange(c.shape[0]):
        for _ in range(repeats):
            micro_kernel(depth, a, 0, b, 0, COLUMNS, c[worker], 0, COLUMNS, False, count, COLUMNS)


@numba.njit(nogil=True)
def _sgemm(w: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    gemm_into(w, b, False, c)


def micro_seconds(threads: int, count: int = ROWS, depth: int = 256, repeats: int = 40000) -> float:
    """Seconds per block of ``count`` stored rows, ``threads`` micro-kernels on blocks in L1 (best of 5)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal(depth * ROWS).astype(np.float32)
    b = rng.standard_normal(depth * COLUMNS).astype(np.float32)
    c = np.zeros((threads, ROWS * COLUMNS), np.float32)
    numba.set_num_threads(threads)
    _blocks(depth, a, b, c, 10, count)
    return min(_seconds(lambda: _blocks(depth, a, b, c, repeats, count)) for _ in range(5)) / repeats


def micro_rate(threads: int, depth: int = 256) -> float:
    """GFLOP/s of ``threads`` micro-kernels on full blocks in L1."""
    return 2 * ROWS * COLUMNS * depth * threads / micro_seconds(threads, ROWS, depth) / 1e9


def matmul_rate(threads: int, size: int = 1024) -> float:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size)).astype(np.float32) for _ in range(2))
    out = np.empty((size, size), np.float32)
    with threadpool_limits(threads, user_api="blas"):
        np.matmul(a, b, out=out)
        best = min(_seconds(lambda: np.matmul(a, b, out=out)) for _ in range(5))
    return 2 * size**3 / best / 1e9


def _seconds(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def gemm_row(m: int, k: int, n: int, rounds: int) -> str:
    rng = np.random.default_rng(m + k + n)
    w = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    packed, scratch = pack_weights(w), np.empty(SCRATCH, np.float32)
    ours, theirs = np.empty((m, n), np.float32), np.empty((m, n), np.float32)
    runs = {
        "packed": lambda: packed_gemm(
            packed, k, 0, m, b.reshape(-1), 0, n, n, ours.reshape(-1), 0, n, scratch
        ),
        "sgemm": lambda: _sgemm(w, b, theirs),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    with threadpool_limits(1, user_api="blas"):
        for run in runs.values():
            run()
        for round_ in range(rounds):
            for name in list(runs)[round_ % 2 :] + list(runs)[: round_ % 2]:
                times[name].append(_seconds(runs[name]))
    np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-3)
    rate = {name: 2 * m * k * n / float(np.median(t)) / 1e9 for name, t in times.items()}
    return f"| {m} x {k} x {n} | {rate['sgemm']:.0f} | {rate['packed']:.0f} | {rate['packed'] / rate['sgemm']:.2f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--print-only", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    peaks = [
        f"| micro-kernel, operands in L1 | {micro_rate(1):.0f} | {micro_rate(2):.0f} |",
        f"| np.matmul 1024^3 (OpenBLAS) | {matmul_rate(1):.0f} | {matmul_rate(2):.0f} |",
    ]
    cut = [f"| {count} | {micro_seconds(1, count) * 1e9:.0f} |" for count in (ROWS, 5, 4, 3, 2, 1)]
    rows = [gemm_row(m, k, n, args.rounds) for m, k, n in SHAPES]
    lines = [
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end. Command: `.venv/bin/python benchmarks/packed_gemm.py "
        f"--rounds {args.rounds}`",
        "",
        "| GFLOP/s | 1 thread | 2 threads |",
        "|---|---:|---:|",
        *peaks,
        "",
        "One thread, ns per 256-deep block by the rows it stores (a block cut by the last rows of C runs "
        "a shorter depth loop from 4 rows down):",
        "",
        "| rows | ns per block |",
        "|---:|---:|",
        *cut,
        "",
        f"One thread, M x K x N (weights x columns), medians of {args.rounds} interleaved calls, GFLOP/s:",
        "",
        "| product | sgemm | packed_gemm | packed / sgemm |",
        "|---|---:|---:|---:|",
        *rows,
    ]
    print("\n".join(lines))
    if not args.print_only:
        DOC.write_text(replace_section(DOC.read_text(), "packed", lines))


if __name__ == "__main__":
    main()
