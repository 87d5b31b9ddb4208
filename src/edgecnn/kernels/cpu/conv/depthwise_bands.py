"""One depthwise plane of any filter size, computed in bands of output rows that stay in L1.

The plane is laid out so that every tap of the filter reads a contiguous run at a fixed offset
from the output position: at stride 1 the zero-bordered plane itself (output q = oy * width + ox
reads element q + ki * dilation_h * width + kj * dilation_w), at stride 2 the plane dealt into its
four row/column phases (``depthwise.fill_phases``; q = oy * pitch + ox reads phase (ki % 2, kj % 2)
at q + ki // 2 * pitch + kj // 2). Each band of output rows is then one long row: per filter row,
one pass whose taps (up to seven) sit in registers, a vector multiply-add per tap and output
vector, no border tests (the border is the layout's zeros), and the few positions per row past the
output's width computed and dropped. The epilogue (bias first, activation last) runs on the band
while it is in L1.
"""

from __future__ import annotations

import os

import numba
import numpy as np

from edgecnn.kernels.cpu.gemm.epilogue import activate_in_place
from edgecnn.kernels.cpu.gemm.microkernel import LANES

L1_FALLBACK_BYTES = 32 << 10
"""L1 data cache assumed where the OS does not say (the usual size of x86 and Arm cores)."""


def l1_data_bytes() -> int:
    """The L1 data cache of one core, from the OS (glibc's sysconf), else ``L1_FALLBACK_BYTES``."""
    try:
        size = os.sysconf("SC_LEVEL1_DCACHE_SIZE")
    except (ValueError, OSError):
        return L1_FALLBACK_BYTES
    return size if size and size > 0 else L1_FALLBACK_BYTES


BAND_FLOATS = l1_data_bytes() // 16
"""Output positions per band: a quarter of L1 in floats, so that a band and the input rows it reads
stay in L1 while every filter row passes over it."""


WIDE_ROW = 4 * LANES
"""Outputs per row from which finish_rows activates row by row: four vectors, so that the scalar
remainder is a small share of each row."""


@numba.njit(inline="always", cache=True)
def _taps7(
    src: np.ndarray,
    o0: np.uint64,
    o1: np.uint64,
    o2: np.uint64,
    o3: np.uint64,
    o4: np.uint64,
    o5: np.uint64,
    o6: np.uint64,
    w: np.ndarray,
    k: np.uint64,
    work: np.ndarray,
    count: np.uint64,
) -> None:
    """work[i] += the seven taps w[k..k+6] at src[o_j + i], for i < count."""
    w0, w1, w2, w3 = w[k], w[k + np.uint64(1)], w[k + np.uint64(2)], w[k + np.uint64(3)]
    w4, w5, w6 = w[k + np.uint64(4)], w[k + np.uint64(5)], w[k + np.uint64(6)]
    for i in range(count):
        work[i] += (
            (w0 * src[o0 + i] + w1 * src[o1 + i])
            + (w2 * src[o2 + i] + w3 * src[o3 + i])
            + (w4 * src[o4 + i] + w5 * src[o5 + i])
            + w6 * src[o6 + i]
        )


@numba.njit(inline="always", cache=True)
def _taps5(
    src: np.ndarray,
    o0: np.uint64,
    o1: np.uint64,
    o2: np.uint64,
    o3: np.uint64,
    o4: np.uint64,
    w: np.ndarray,
    k: np.uint64,
    work: np.ndarray,
    count: np.uint64,
) -> None:
    """work[i] += the five taps w[k..k+4] at src[o_j + i], for i < count."""
    w0, w1, w2 = w[k], w[k + np.uint64(1)], w[k + np.uint64(2)]
    w3, w4 = w[k + np.uint64(3)], w[k + np.uint64(4)]
    for i in range(count):
        work[i] += (
            (w0 * src[o0 + i] + w1 * src[o1 + i]) + (w2 * src[o2 + i] + w3 * src[o3 + i]) + w4 * src[o4 + i]
        )


@numba.njit(inline="always", cache=True)
def _taps3(
    src: np.ndarray,
    o0: np.uint64,
    o1: np.uint64,
    o2: np.uint64,
    w: np.ndarray,
    k: np.uint64,
    work: np.ndarray,
    count: np.uint64,
) -> None:
    """work[i] += the three taps w[k..k+2] at src[o_j + i], for i < count."""
    w0, w1, w2 = w[k], w[k + np.uint64(1)], w[k + np.uint64(2)]
    for i in range(count):
        work[i] += w0 * src[o0 + i] + w1 * src[o1 + i] + w2 * src[o2 + i]


@numba.njit(inline="always", cache=True)
def _tap1(
    src: np.ndarray, o0: np.uint64, w: np.ndarray, k: np.uint64, work: np.ndarray, count: np.uint64
) -> None:
    w0 = w[k]
    for i in range(count):
        work[i] += w0 * src[o0 + i]


@numba.njit(inline="always", cache=True)
def _filter_row(
    src: np.ndarray,
    row: np.uint64,  # offset of this filter row's taps (plus the band's first position)
    columns: np.ndarray,  # (KW,) offsets of the filter's columns
    w: np.ndarray,  # flat filters
    k: np.uint64,  # offset of this filter row's first weight
    work: np.ndarray,
    count: np.uint64,
) -> None:
    """work[i] += one filter row's taps, seven, five or three at a time (the rest one by one)."""
    width = columns.shape[0]
    j = 0
    while j < width:
        left = width - j
        c = row + columns[j]
        t = k + np.uint64(j)
        if left >= 7:
            _taps7(
                src, c, row + columns[j + 1], row + columns[j + 2], row + columns[j + 3],
                row + columns[j + 4], row + columns[j + 5], row + columns[j + 6], w, t, work, count,
            )  # fmt: skip
            j += 7
        elif left >= 5:
            _taps5(
                src, c, row + columns[j + 1], row + columns[j + 2], row + columns[j + 3],
                row + columns[j + 4], w, t, work, count,
            )  # fmt: skip
            j += 5
        elif left >= 3:
            _taps3(src, c, row + columns[j + 1], row + columns[j + 2], w, t, work, count)
            j += 3
        else:
            _tap1(src, c, w, t, work, count)
            j += 1


@numba.njit(inline="always", cache=True)
def banded_plane(
    src: np.ndarray,  # flat laid-out plane (padded, or its four stride-2 phases)
    rows: np.ndarray,  # (KH,) uint64 offsets of the filter's rows in ``src``
    columns: np.ndarray,  # (KW,) uint64 offsets of the filter's columns
    w: np.ndarray,  # flat (M * KH * KW) filters
    w_at: np.uint64,  # offset of this plane's filter
    b: np.float32,
    pitch: int,  # positions per output row (>= out_w; the rest are computed and dropped)
    band_rows: int,
    work: np.ndarray,  # >= band_rows * pitch floats
    out: np.ndarray,  # flat output
    out_at: np.uint64,  # offset of the OH x OW output plane
    out_h: int,
    out_w: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
) -> None:
    """out plane[oy, ox] = act(b + sum of the taps at position oy * pitch + ox), band by band."""
    kernel_w = np.uint64(columns.shape[0])
    p = np.uint64(pitch)
    width = np.uint64(out_w)
    useful = np.uint64((out_h - 1) * pitch + out_w)  # positions up to the last output
    for first in range(0, out_h, band_rows):
        end = min(first + band_rows, out_h)
        q0 = np.uint64(first) * p
        count = min(np.uint64(end) * p, useful) - q0
        for i in range(count):
            work[i] = b
        for ki in range(rows.shape[0]):
            _filter_row(src, rows[ki] + q0, columns, w, w_at + np.uint64(ki) * kernel_w, work, count)
        finish_rows(
            work, count, p, out, out_at + np.uint64(first) * width, end - first, out_w, kind, alpha, low, high
        )


@numba.njit(inline="always", cache=True)
def finish_rows(
    work: np.ndarray,  # flat pass of output rows, ``pitch`` positions each
    count: np.uint64,  # positions computed
    pitch: np.uint64,
    out: np.ndarray,  # flat output
    at: np.uint64,  # offset of the first row's output
    out_h: int,
    out_w: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
) -> None:
    """out[at + oy * out_w + ox] = act(work[oy * pitch + ox]), the extra positions dropped. Rows of
    WIDE_ROW outputs or more: each row activated in place and copied while it is in L1. Narrower
    rows (7 or 14 outputs) would each run mostly in the vector loop's scalar remainder: the
    activation runs over the whole pass at once instead (with the first row), then the rows are
    copied. One call site: every caller inlines the activation's loops once."""
    width = np.uint64(out_w)
    whole = out_w < WIDE_ROW
    for oy in range(np.uint64(out_h)):
        source = oy * pitch
        if not whole or oy == 0:
            activate_in_place(work, source, count if whole else width, kind, alpha, low, high)
        target = at + oy * width
        for i in range(width):
            out[target + i] = work[source + i]
