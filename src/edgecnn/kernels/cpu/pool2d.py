"""Compiled 2-D max and average pooling, and the global forms, parallel over (image, channel).

The window taps inside the input (and, for count_include_pad, inside the padded input) are found
once per output row and column, so the reduction loops carry no bounds tests.
"""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.epilogue import activate
from edgecnn.kernels.cpu.im2col import valid_range


@numba.njit(cache=True)
def _tap_ranges(
    out_size: int, stride: int, pad_begin: int, pad_end: int, dilation: int, size: int, taps: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per output index: first and end tap inside the input, and the taps inside the padded input."""
    lo = np.empty(out_size, dtype=np.int64)
    hi = np.empty(out_size, dtype=np.int64)
    padded = np.empty(out_size, dtype=np.int64)
    for o in range(out_size):
        start = o * stride - pad_begin
        lo[o], hi[o] = valid_range(start, dilation, size, taps)
        p_lo, p_hi = valid_range(start + pad_begin, dilation, size + pad_begin + pad_end, taps)
        padded[o] = p_hi - p_lo
    return lo, hi, padded


@numba.njit(cache=True)
def _pool_plane(
    plane: np.ndarray,  # (H, W)
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    y_lo: np.ndarray,
    y_hi: np.ndarray,
    y_padded: np.ndarray,
    x_lo: np.ndarray,
    x_hi: np.ndarray,
    x_padded: np.ndarray,
    is_max: bool,
    count_include_pad: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    dest: np.ndarray,  # (OH, OW), written
) -> None:
    """One (image, channel) plane. Indices are cast to unsigned once known to be inside the input:
    numba then skips its negative-index wraparound, which otherwise costs more than the max itself."""
    out_h, out_w = dest.shape
    for oy in range(out_h):
        k0, k1 = y_lo[oy], y_hi[oy]
        y0 = oy * stride_h - pad_top
        for ox in range(out_w):
            j0, j1 = x_lo[ox], x_hi[ox]
            x0 = ox * stride_w - pad_left
            if is_max:
                best = np.float32(-np.inf)
                for ki in range(k0, k1):
                    row = np.uint64(y0 + ki * dilation_h)
                    for kj in range(j0, j1):
                        v = plane[row, np.uint64(x0 + kj * dilation_w)]
                        if v > best or v != v:
                            best = v
                result = best
            else:
                total = np.float32(0.0)
                for ki in range(k0, k1):
                    row = np.uint64(y0 + ki * dilation_h)
                    for kj in range(j0, j1):
                        total += plane[row, np.uint64(x0 + kj * dilation_w)]
                divisor = y_padded[oy] * x_padded[ox] if count_include_pad else (k1 - k0) * (j1 - j0)
                result = total / np.float32(divisor) if divisor > 0 else np.float32(np.nan)
            if kind == 0:
                dest[np.uint64(oy), np.uint64(ox)] = result
            else:
                dest[np.uint64(oy), np.uint64(ox)] = activate(result, kind, alpha, low, high)


@numba.njit(parallel=True, nogil=True, cache=True)
def pool_2d(
    x: np.ndarray,  # (N, C, H, W)
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    pad_bottom: int,
    pad_right: int,
    dilation_h: int,
    dilation_w: int,
    is_max: bool,
    count_include_pad: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    out: np.ndarray,  # (N, C, OH, OW), written
) -> None:
    """Windows may run past the padded input (ceil_mode): those taps never count. With
    count_include_pad, average divides by the taps inside the *padded* input. Max propagates NaN.
    Parallel over planes; each plane runs in a separately compiled function (numba optimises a
    parallel loop's body less well than a plain function)."""
    batch, channels, height, width = x.shape
    out_h, out_w = out.shape[2], out.shape[3]
    y_lo, y_hi, y_padded = _tap_ranges(out_h, stride_h, pad_top, pad_bottom, dilation_h, height, kernel_h)
    x_lo, x_hi, x_padded = _tap_ranges(out_w, stride_w, pad_left, pad_right, dilation_w, width, kernel_w)
    for job in numba.prange(batch * channels):
        n, c = job // channels, job % channels
        _pool_plane(
            x[n, c],
            stride_h,
            stride_w,
            pad_top,
            pad_left,
            dilation_h,
            dilation_w,
            y_lo,
            y_hi,
            y_padded,
            x_lo,
            x_hi,
            x_padded,
            is_max,
            count_include_pad,
            kind,
            alpha,
            low,
            high,
            out[n, c],
        )


@numba.njit(parallel=True, nogil=True, cache=True)
def global_pool(
    planes: np.ndarray,  # (N*C, H*W)
    is_max: bool,
    out: np.ndarray,  # (N*C,), written
) -> None:
    """Mean (accumulated in float64) or max (NaN-propagating) of every plane."""
    count, size = planes.shape
    for p in numba.prange(count):
        row = planes[p]
        if is_max:
            best = -np.inf
            for i in range(size):
                v = row[i]
                if v > best or v != v:
                    best = v
            out[p] = best
        else:
            total = 0.0
            for i in range(size):
                total += row[i]
            out[p] = total / size
