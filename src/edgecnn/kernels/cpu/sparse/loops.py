"""The compiled loops of the sparse kernels: CSR weights times dense activations, with the fused
bias/activation epilogue, rows (or pixel tiles) split over numba's threads.

Zero weights are skipped, not multiplied: where an input is NaN or infinite, an output whose
non-zero weights all miss that input stays finite (the dense product would give NaN). Pruned models
are the use; the difference is documented in the compression guide (docs/).
"""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.conv.im2col import im2col_range
from edgecnn.kernels.cpu.gemm.epilogue import F32, activate

_FAST = {"reassoc", "contract"}
"""Reordered float32 sums (several accumulators, vector lanes); no assumption about NaN or inf."""


@numba.njit(parallel=True, cache=True, fastmath=_FAST, nogil=True)
def spmv(
    x: np.ndarray,  # (K,)
    indptr: np.ndarray,  # int32[N + 1]
    indices: np.ndarray,  # uint16/int32[nnz]
    values: np.ndarray,  # float32[nnz]
    addend: np.ndarray,  # (1, N) beta * C, or (1, 1) when absent
    has_addend: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    bounds: np.ndarray,  # int64[workers + 1]: the rows of each worker
    out: np.ndarray,  # (N,), written
) -> None:
    """out[r] = act(sum_j values[j] * x[indices[j]] + addend[0, r]) for each weight row r."""
    for worker in numba.prange(len(bounds) - 1):
        for r in range(bounds[worker], bounds[worker + 1]):
            start, stop = indptr[r], indptr[r + 1]
            row_values, row_indices = values[start:stop], indices[start:stop]
            acc = np.float32(0.0)
            for j in range(stop - start):  # from 0 over slices: no wraparound test, so it vectorises
                acc += row_values[j] * x[row_indices[j]]
            v = acc + addend[0, r] if has_addend else acc
            out[r] = activate(v, kind, alpha, low, high)


@numba.njit(inline="always", cache=True)
def _store(
    out: np.ndarray,
    m: int,
    r: int,
    acc: F32,
    addend: np.ndarray,
    has_addend: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
) -> None:
    v = np.float32(acc) + addend[m, r] if has_addend else np.float32(acc)
    out[m, r] = activate(v, kind, alpha, low, high)


@numba.njit(parallel=True, cache=True, fastmath=_FAST, nogil=True)
def spmm(
    a: np.ndarray,  # (M, K), rows contiguous
    indptr: np.ndarray,
    indices: np.ndarray,
    values: np.ndarray,
    addend: np.ndarray,  # (M, N), or (1, 1) when absent
    has_addend: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    bounds: np.ndarray,
    out: np.ndarray,  # (M, N), written
) -> None:
    """out[m, r] = act(sum_j values[j] * a[m, indices[j]] + addend[m, r]). Four activation rows
    share each load of a weight and its index (measured faster than a transposed-A axpy form)."""
    batch = a.shape[0]
    for worker in numba.prange(len(bounds) - 1):
        for r in range(bounds[worker], bounds[worker + 1]):
            start, stop = indptr[r], indptr[r + 1]
            row_values, row_indices = values[start:stop], indices[start:stop]
            m = 0
            while m + 4 <= batch:
                x0, x1, x2, x3 = a[m], a[m + 1], a[m + 2], a[m + 3]
                s0 = s1 = s2 = s3 = np.float32(0.0)
                for j in range(stop - start):
                    v, k = row_values[j], row_indices[j]
                    s0 += v * x0[k]
                    s1 += v * x1[k]
                    s2 += v * x2[k]
                    s3 += v * x3[k]
                _store(out, m, r, s0, addend, has_addend, kind, alpha, low, high)
                _store(out, m + 1, r, s1, addend, has_addend, kind, alpha, low, high)
                _store(out, m + 2, r, s2, addend, has_addend, kind, alpha, low, high)
                _store(out, m + 3, r, s3, addend, has_addend, kind, alpha, low, high)
                m += 4
            while m < batch:
                x = a[m]
                acc = np.float32(0.0)
                for j in range(stop - start):
                    acc += row_values[j] * x[row_indices[j]]
                _store(out, m, r, acc, addend, has_addend, kind, alpha, low, high)
                m += 1


@numba.njit(cache=True, fastmath=_FAST)
def sparse_rows_times(
    indptr: np.ndarray,
    indices: np.ndarray,
    values: np.ndarray,
    first_row: int,  # the CSR rows first_row .. first_row + rows
    columns: np.ndarray,  # (>= column_row + Kg, >= column_start + width), C-contiguous
    column_row: int,  # the row of ``columns`` that weight column 0 multiplies
    column_start: int,
    out: np.ndarray,  # (>= first_row + rows, >= out_start + width), C-contiguous
    rows: int,
    out_start: int,
    width: int,
    bias: np.ndarray,
    has_bias: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
) -> None:
    """out[first_row + r, out_start:+width] = act(bias + sum_j values[j] * columns[column_row +
    indices[j], column_start:+width]). Whole C-contiguous arrays and offsets come in, not 2-D views,
    so that each row is known to be contiguous and the axpy loops vectorise."""
    for r in range(rows):
        row = out[first_row + r, out_start : out_start + width]
        row[:] = 0.0
        start, stop = indptr[first_row + r], indptr[first_row + r + 1]
        row_values, row_indices = values[start:stop], indices[start:stop]
        for j in range(stop - start):
            v = row_values[j]
            source = columns[column_row + row_indices[j], column_start : column_start + width]
            for p in range(width):
                row[p] += v * source[p]
        b = bias[first_row + r] if has_bias else np.float32(0.0)
        if kind == 0:
            if has_bias:
                for p in range(width):
                    row[p] += b
        else:
            for p in range(width):
                row[p] = activate(row[p] + b, kind, alpha, low, high)


@numba.njit(parallel=True, cache=True, nogil=True)
def sparse_conv_2d(
    x: np.ndarray,  # (N, C, H, W)
    indptr: np.ndarray,  # int32[M + 1]: CSR of the weights as (M, Kg), Kg = Cg * KH * KW
    indices: np.ndarray,
    values: np.ndarray,
    groups: int,
    bias: np.ndarray,  # (M,)
    has_bias: bool,
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    pointwise: bool,  # 1x1, stride 1, no padding: the input is the column matrix
    kind: int,
    alpha: float,
    low: float,
    high: float,
    p_step: int,  # output pixels per task
    m_step: int,  # output channels (of one group) per task
    columns: np.ndarray,  # (workers, Kg * p_step) scratch; unused when pointwise
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    """Each task (image, group, pixel range, range of output channels) builds its im2col columns
    and multiplies those channels' sparse rows by them, so each worker's columns stay in its cache.
    Channel ranges are cut only when there are fewer pixel ranges than workers (they repeat the
    im2col work)."""
    batch, channels = x.shape[0], x.shape[1]
    out_channels = out.shape[1]
    out_per_group = out_channels // groups
    in_per_group = channels // groups
    group_rows = in_per_group * kernel_h * kernel_w
    out_w = out.shape[3]
    pixels = out.shape[2] * out_w
    out_rows = out.reshape(batch, out_channels, pixels)
    x_rows = x.reshape(batch, channels, x.shape[2] * x.shape[3])
    p_tiles = (pixels + p_step - 1) // p_step
    m_tiles = (out_per_group + m_step - 1) // m_step
    tasks = batch * groups * p_tiles * m_tiles
    workers = columns.shape[0]
    for worker in numba.prange(workers):
        buffer = columns[worker]
        for task in range(worker, tasks, workers):
            m_tile = task % m_tiles
            p_tile = (task // m_tiles) % p_tiles
            g = (task // (m_tiles * p_tiles)) % groups
            n = task // (m_tiles * p_tiles * groups)
            p0 = p_tile * p_step
            width = min(p0 + p_step, pixels) - p0
            first = g * out_per_group + m_tile * m_step
            rows = min(m_step, out_per_group - m_tile * m_step)
            if pointwise:
                source, source_row, source_start = x_rows[n], g * in_per_group, p0
            else:
                b = buffer[: group_rows * width].reshape(group_rows, width)
                im2col_range(
                    x[n, g * in_per_group : (g + 1) * in_per_group],
                    kernel_h,
                    kernel_w,
                    stride_h,
                    stride_w,
                    pad_top,
                    pad_left,
                    dilation_h,
                    dilation_w,
                    out_w,
                    p0,
                    p0 + width,
                    b,
                )
                source, source_row, source_start = b, 0, 0
            sparse_rows_times(
                indptr,
                indices,
                values,
                first,
                source,
                source_row,
                source_start,
                out_rows[n],
                rows,
                p0,
                width,
                bias,
                has_bias,
                kind,
                alpha,
                low,
                high,
            )
