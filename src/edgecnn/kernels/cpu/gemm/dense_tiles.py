"""Dense layers as tiled GEMMs on numba's threads: each task computes a block of Y = A @ W.T with
single-threaded BLAS and applies the addend and activation to it at once. W is stored (N, K), one
output's weights per row, so a block of outputs reads a contiguous slab of weights (GEMV-friendly).

``dense_gemm_serial`` is the same loop compiled without a parallel region (called with one worker), so a
small layer (every FC of LeNet-5 at batch 1) neither wakes a second thread nor needs the caller to
switch numba's thread count to one and back around it."""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.gemm.epilogue import activate
from edgecnn.kernels.cpu.system.blas import gemm_into
from edgecnn.kernels.cpu.system.twins import parallel_and_serial


@numba.njit(inline="always", cache=True)
def _dense_tasks(
    worker: int,
    a: np.ndarray,
    weights: np.ndarray,
    addend: np.ndarray,
    has_addend: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    row_step: int,
    column_step: int,
    workers: int,
    out: np.ndarray,
) -> None:
    """The tiles of one worker: every ``workers``-th task, starting at ``worker``."""
    rows, columns = out.shape
    row_tiles = (rows + row_step - 1) // row_step
    column_tiles = (columns + column_step - 1) // column_step
    tasks = row_tiles * column_tiles
    for task in range(worker, tasks, workers):
        m0 = (task // column_tiles) * row_step
        n0 = (task % column_tiles) * column_step
        m1 = min(m0 + row_step, rows)
        n1 = min(n0 + column_step, columns)
        tile = out[m0:m1, n0:n1]
        gemm_into(a[m0:m1], weights[n0:n1], True, tile)
        if not has_addend and kind == 0:
            continue
        for i in range(m1 - m0):
            row = tile[i]
            for j in range(n1 - n0):
                v = row[j] + addend[m0 + i, n0 + j] if has_addend else row[j]
                row[j] = activate(v, kind, alpha, low, high)


def _dense_gemm(
    a: np.ndarray,  # (M, K), rows contiguous
    weights: np.ndarray,  # (N, K)
    addend: np.ndarray,  # (M, N) beta * C broadcast, or (1, 1) when absent
    has_addend: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    row_step: int,
    column_step: int,
    workers: int,
    out: np.ndarray,  # (M, N), written
) -> None:
    for worker in numba.prange(workers):
        _dense_tasks(
            worker,
            a,
            weights,
            addend,
            has_addend,
            kind,
            alpha,
            low,
            high,
            row_step,
            column_step,
            workers,
            out,
        )


dense_gemm, dense_gemm_serial = parallel_and_serial(_dense_gemm, "dense_gemm")
