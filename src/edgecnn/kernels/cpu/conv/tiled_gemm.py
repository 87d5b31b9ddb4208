"""Convolution as tiled GEMMs on numba's threads: each task owns one tile of the output
(image, group, rows of output channels, range of output pixels) and, on its own thread, builds
that tile's im2col columns (unless the conv is 1x1 and the input already is the matrix), calls
single-threaded BLAS, then applies bias and activation while the tile is still in cache.

One parallel region per layer; ``workers`` tasks lists run side by side, each with its own
columns buffer, so the scratch memory is bounded by workers x Kg x tile width, not by the layer.
"""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.conv.im2col import gather_rows, im2col_range
from edgecnn.kernels.cpu.gemm.epilogue import activate_in_place
from edgecnn.kernels.cpu.system.blas import gemm_into
from edgecnn.kernels.cpu.system.twins import parallel_and_serial


@numba.njit(cache=True)
def rows_epilogue(
    block: np.ndarray,  # (channels, pixels), C-contiguous: one image's output
    first: int,  # first row (output channel) of the tile
    last: int,  # end of the tile's rows
    p0: int,  # the tile's pixel range
    p1: int,
    bias: np.ndarray,
    has_bias: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
) -> None:
    """block[r, p0:p1] = act(block[r, p0:p1] + bias[r]) in place for the tile's rows. Each row is
    sliced from a C-contiguous row, so numba knows it is contiguous and vectorises the loops (a
    2-D tile view would be typed as any-layout: scalar code, 3-4x slower)."""
    zero = np.float32(0.0)
    for r in range(first, last):
        b = bias[r] if has_bias else zero
        row = block[r][p0:p1]
        if kind == 0:
            for p in range(p1 - p0):
                row[p] = row[p] + b
        elif kind == 1:
            for p in range(p1 - p0):
                v = row[p] + b
                row[p] = zero if v <= zero else v
        elif kind == 3:
            lo, hi = np.float32(low), np.float32(high)
            for p in range(p1 - p0):
                v = row[p] + b
                row[p] = v if v != v else min(max(v, lo), hi)
        else:  # the bias in the activation's own loop, which vectorises
            activate_in_place(row, np.uint64(0), np.uint64(p1 - p0), kind, alpha, low, high, b)


@numba.njit(cache=True)
def _gemm_tasks(
    worker: int,
    workers: int,
    x: np.ndarray,  # (N, C, H, W)
    weights: np.ndarray,  # (G, Mg, Kg), Kg = Cg * KH * KW
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
    m_step: int,  # output channels per tile
    p_step: int,  # output pixels per tile
    taps: np.ndarray,  # im2col.tap_table, or NO_TAP_TABLE: unfold segment by segment
    columns: np.ndarray,  # (workers, Kg, p_step) scratch; unused when pointwise
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    """Tasks worker, worker + workers, ... of the layer: tiles of (image, group, output channels,
    pixels), each im2col'd (unless pointwise), multiplied by BLAS and finished in cache."""
    batch, channels = x.shape[0], x.shape[1]
    groups, out_per_group = weights.shape[0], weights.shape[1]
    in_per_group = channels // groups
    out_h, out_w = out.shape[2], out.shape[3]
    pixels = out_h * out_w
    out_rows = out.reshape(batch, groups * out_per_group, pixels)
    x_rows = x.reshape(batch, channels, x.shape[2] * x.shape[3])
    m_tiles = (out_per_group + m_step - 1) // m_step
    p_tiles = (pixels + p_step - 1) // p_step
    tasks = batch * groups * m_tiles * p_tiles
    buffer = columns[worker]
    for task in range(worker, tasks, workers):
        p_tile = task % p_tiles
        rest = task // p_tiles
        m_tile = rest % m_tiles
        rest //= m_tiles
        g = rest % groups
        n = rest // groups
        p0 = p_tile * p_step
        p1 = min(p0 + p_step, pixels)
        m0 = m_tile * m_step
        m1 = min(m0 + m_step, out_per_group)
        if pointwise:
            b = x_rows[n, g * in_per_group : (g + 1) * in_per_group, p0:p1]
        else:
            # packed at the tile's own width: a C-contiguous matrix, so numba compiles im2col's
            # copies for contiguous rows (a [:, :width] slice would be any-layout: strided code)
            b = buffer.reshape(-1)[: in_per_group * kernel_h * kernel_w * (p1 - p0)].reshape(
                in_per_group * kernel_h * kernel_w, p1 - p0
            )
            image = x[n, g * in_per_group : (g + 1) * in_per_group]
            if taps.shape[0] > 0:
                gather_rows(image, taps, 0, b.shape[0], p0, p1, b)
            else:
                im2col_range(
                    image, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, dilation_h,
                    dilation_w, out_w, p0, p1, b,
                )  # fmt: skip
        first = g * out_per_group + m0
        tile = out_rows[n, first : g * out_per_group + m1, p0:p1]
        gemm_into(weights[g, m0:m1], b, False, tile)
        if has_bias or kind != 0:
            rows_epilogue(
                out_rows[n], first, g * out_per_group + m1, p0, p1, bias, has_bias, kind, alpha, low, high
            )


def _conv_gemm_2d(
    x: np.ndarray,  # (N, C, H, W)
    weights: np.ndarray,  # (G, Mg, Kg), Kg = Cg * KH * KW
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
    m_step: int,  # output channels per tile
    p_step: int,  # output pixels per tile
    taps: np.ndarray,  # im2col.tap_table, or NO_TAP_TABLE: unfold segment by segment
    columns: np.ndarray,  # (workers, Kg, p_step) scratch; unused when pointwise
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    """All tiles, ``columns.shape[0]`` workers side by side (one parallel region per layer)."""
    workers = columns.shape[0]
    for worker in numba.prange(workers):
        _gemm_tasks(
            worker,
            workers,
            x,
            weights,
            bias,
            has_bias,
            kernel_h,
            kernel_w,
            stride_h,
            stride_w,
            pad_top,
            pad_left,
            dilation_h,
            dilation_w,
            pointwise,
            kind,
            alpha,
            low,
            high,
            m_step,
            p_step,
            taps,
            columns,
            out,
        )


conv_gemm_2d, conv_gemm_2d_serial = parallel_and_serial(_conv_gemm_2d, "conv_gemm_2d")
"""conv_gemm_2d: all tiles on numba's threads (one parallel region per layer); conv_gemm_2d_serial: the
same loop without a parallel region, for layers with one worker, where starting a region costs as
much as the work."""
