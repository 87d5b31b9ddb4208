"""Compiled 2-D max and average pooling, and the global forms, parallel over (image, channel).

Windows reduce over whole output rows, one tap at a time, from a bordered copy of the plane (the
depthwise kernel's layout); the taps inside the input (and, for count_include_pad, inside the padded
input) are counted once per output row and column for the average's divisor.
"""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.depthwise import fill_padded, tap_column
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


@numba.njit(inline="always", cache=True)
def _max(a: np.float32, b: np.float32) -> np.float32:
    """The larger value; NaN if either is (a NaN ``b`` wins every comparison by losing it)."""
    return a if (a > b) | (a != a) else b


@numba.njit(inline="always", cache=True)
def _window3(
    a0: np.ndarray,
    a1: np.ndarray,
    a2: np.ndarray,
    b0: np.ndarray,
    b1: np.ndarray,
    b2: np.ndarray,
    c0: np.ndarray,
    c1: np.ndarray,
    c2: np.ndarray,
    is_max: bool,
    out: np.ndarray,
) -> None:
    """out[i] = max (or sum) of the nine taps at i, in one pass: views start at each tap's column."""
    if is_max:
        for i in range(out.shape[0]):
            m = _max(a1[i], a0[i])
            m = _max(a2[i], m)
            m = _max(b0[i], m)
            m = _max(b1[i], m)
            m = _max(b2[i], m)
            m = _max(c0[i], m)
            m = _max(c1[i], m)
            out[i] = _max(c2[i], m)
    else:
        for i in range(out.shape[0]):
            out[i] = (a0[i] + a1[i] + a2[i]) + (b0[i] + b1[i] + b2[i]) + (c0[i] + c1[i] + c2[i])


@numba.njit(cache=True)
def _pool_rows_3x3(
    padded: np.ndarray,
    stride_h: int,
    stride_w: int,
    dilation_h: int,
    dilation_w: int,
    is_max: bool,
    dest: np.ndarray,
) -> None:
    """3x3 windows (ResNet's, ShuffleNet's, GoogLeNet's max pools): every output row in one pass."""
    phase_w = padded.shape[1] // stride_w
    t0 = tap_column(0, stride_w, phase_w)
    t1 = tap_column(dilation_w, stride_w, phase_w)
    t2 = tap_column(2 * dilation_w, stride_w, phase_w)
    for oy in range(dest.shape[0]):
        top = oy * stride_h
        r0 = padded[top]
        r1 = padded[top + dilation_h]
        r2 = padded[top + 2 * dilation_h]
        _window3(
            r0[t0:], r0[t1:], r0[t2:], r1[t0:], r1[t1:], r1[t2:], r2[t0:], r2[t1:], r2[t2:], is_max, dest[oy]
        )


@numba.njit(cache=True)
def _pool_rows(
    padded: np.ndarray,  # one plane, bordered with the neutral value and dealt into stride_w phases
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    dilation_h: int,
    dilation_w: int,
    is_max: bool,
    dest: np.ndarray,  # (OH, OW), written: the max or the sum of every window
) -> None:
    """Tap by tap over whole output rows: every tap's columns are one contiguous view of a phased
    row (see depthwise.fill_padded), so each pass is a branch-free vectorised max or add."""
    out_h, out_w = dest.shape
    phase_w = padded.shape[1] // stride_w
    for oy in range(out_h):
        out = dest[oy]
        first = True
        for ki in range(kernel_h):
            row = padded[oy * stride_h + ki * dilation_h]
            for kj in range(kernel_w):
                values = row[tap_column(kj * dilation_w, stride_w, phase_w) :]
                if first:
                    for i in range(out_w):
                        out[i] = values[i]
                    first = False
                elif is_max:
                    for i in range(out_w):
                        out[i] = _max(values[i], out[i])
                else:
                    for i in range(out_w):
                        out[i] += values[i]


@numba.njit(cache=True)
def _pool_2x2_direct(plane: np.ndarray, is_max: bool, dest: np.ndarray) -> None:
    """2x2 windows at stride 2 that never leave the plane: max or sum of each pair of row pairs
    (LLVM vectorises the interleaved loads)."""
    out_h, out_w = dest.shape
    for oy in range(out_h):
        top = plane[2 * oy]
        bottom = plane[2 * oy + 1]
        out = dest[oy]
        if is_max:
            for i in range(out_w):
                out[i] = _max(_max(top[2 * i], top[2 * i + 1]), _max(bottom[2 * i], bottom[2 * i + 1]))
        else:
            for i in range(out_w):
                out[i] = (top[2 * i] + top[2 * i + 1]) + (bottom[2 * i] + bottom[2 * i + 1])


@numba.njit(cache=True)
def _finish_rows(
    dest: np.ndarray,
    y_count: np.ndarray,
    x_count: np.ndarray,
    is_max: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
) -> None:
    """Sums to averages (divided by the taps counted for each output), then the activation."""
    out_h, out_w = dest.shape
    for oy in range(out_h):
        row = dest[oy]
        if not is_max:
            for ox in range(out_w):
                divisor = y_count[oy] * x_count[ox]
                row[ox] = row[ox] / np.float32(divisor) if divisor > 0 else np.float32(np.nan)
        if kind != 0:
            for ox in range(out_w):
                row[ox] = activate(row[ox], kind, alpha, low, high)


@numba.njit(cache=True)
def _pool_worker(
    worker: int,  # this worker's share: planes [worker * P // workers, (worker + 1) * P // workers)
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
    workers: int,
    out: np.ndarray,  # (N, C, OH, OW), written
) -> None:
    """One worker's run of planes (see pool_2d)."""
    batch, channels, height, width = x.shape
    out_h, out_w = out.shape[2], out.shape[3]
    y_lo, y_hi, y_padded = _tap_ranges(out_h, stride_h, pad_top, pad_bottom, dilation_h, height, kernel_h)
    x_lo, x_hi, x_padded = _tap_ranges(out_w, stride_w, pad_left, pad_right, dilation_w, width, kernel_w)
    y_count = y_padded if count_include_pad else y_hi - y_lo
    x_count = x_padded if count_include_pad else x_hi - x_lo
    rows = (out_h - 1) * stride_h + (kernel_h - 1) * dilation_h + 1
    cols = (out_w - 1) * stride_w + (kernel_w - 1) * dilation_w + 1
    phase_w = (cols + stride_w - 1) // stride_w
    neutral = np.float32(-np.inf) if is_max else np.float32(0.0)
    planes = batch * channels
    # 2x2/2 windows inside the input (VGG, LeNet, YOLO): read the plane itself, no buffer
    direct = (
        kernel_h == 2 and kernel_w == 2 and stride_h == 2 and stride_w == 2 and dilation_h == 1
        and dilation_w == 1 and pad_top == 0 and pad_left == 0 and rows <= height and cols <= width
    )  # fmt: skip
    padded = np.full((0 if direct else rows, phase_w * stride_w), neutral, dtype=np.float32)
    for job in range(worker * planes // workers, (worker + 1) * planes // workers):
        n, c = job // channels, job % channels
        dest = out[n, c]
        if direct:
            _pool_2x2_direct(x[n, c], is_max, dest)
            if not is_max or kind != 0:
                _finish_rows(dest, y_count, x_count, is_max, kind, alpha, low, high)
            continue
        fill_padded(x[n, c], pad_top, pad_left, stride_w, padded)
        if kernel_h == 3 and kernel_w == 3:
            _pool_rows_3x3(padded, stride_h, stride_w, dilation_h, dilation_w, is_max, dest)
        else:
            _pool_rows(padded, kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, is_max, dest)
        if not is_max or kind != 0:
            _finish_rows(dest, y_count, x_count, is_max, kind, alpha, low, high)


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
    workers: int,  # parallel jobs: the caller's numba thread count (reading it here defeats caching)
    out: np.ndarray,  # (N, C, OH, OW), written
) -> None:
    """Windows may run past the padded input (ceil_mode): those taps never count. With
    count_include_pad, average divides by the taps inside the *padded* input. Max propagates NaN.

    Each worker takes a contiguous run of planes and copies each into a buffer of its own whose
    border holds the neutral value (-inf for max, 0 for the sum), so the window loops need no
    bounds tests; divisors come from the tap counts per output row and column."""
    workers = max(1, min(workers, x.shape[0] * x.shape[1]))
    for worker in numba.prange(workers):
        _pool_worker(
            worker,
            x,
            kernel_h,
            kernel_w,
            stride_h,
            stride_w,
            pad_top,
            pad_left,
            pad_bottom,
            pad_right,
            dilation_h,
            dilation_w,
            is_max,
            count_include_pad,
            kind,
            alpha,
            low,
            high,
            workers,
            out,
        )


@numba.njit(nogil=True, cache=True)
def pool_2d_serial(
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
    workers: int,  # ignored: one worker (the same signature as pool_2d)
    out: np.ndarray,  # (N, C, OH, OW), written
) -> None:
    """pool_2d on the calling thread: no parallel region to start (small layers)."""
    _pool_worker(
        0,
        x,
        kernel_h,
        kernel_w,
        stride_h,
        stride_w,
        pad_top,
        pad_left,
        pad_bottom,
        pad_right,
        dilation_h,
        dilation_w,
        is_max,
        count_include_pad,
        kind,
        alpha,
        low,
        high,
        1,
        out,
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
