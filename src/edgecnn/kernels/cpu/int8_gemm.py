"""Compiled loops of the int8 kernels: quantise, im2col on 8-bit data, int8 x int8 -> int32 GEMM
with the requantising epilogue (int32 bias, per-channel multiplier, activation, saturation).

The GEMM accumulates a block of output rows x columns in int32: for each k, a row of the column
matrix is widened once and multiplied into every weight row of the block (a vectorised
multiply-add over the columns). Numba emits no VNNI/dot-product instructions, so this does not
beat float32 BLAS; it is here to make int8 models run, with their int8 rounding, on any CPU.
"""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.epilogue import activate

ROW_BLOCK = 8
COLUMN_BLOCK = 256


@numba.njit(parallel=True, cache=True)
def quantize_into(x: np.ndarray, scale: float, zero_point: int, lo: int, hi: int, out: np.ndarray) -> None:
    """out = clamp(rint(x / scale + zero_point), lo, hi) over flat arrays (QuantizeLinear)."""
    s = np.float32(scale)
    zp = np.float32(zero_point)
    n = x.shape[0]
    chunk = 4096
    for block in numba.prange((n + chunk - 1) // chunk):
        for i in range(block * chunk, min(n, block * chunk + chunk)):
            v = np.rint(np.float32(np.float32(x[i]) / s) + zp)
            out[i] = min(max(v, lo), hi)


@numba.njit(cache=True)
def im2col_q(
    image: np.ndarray,  # (Cg, H, W) 8-bit
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    out_h: int,
    out_w: int,
    pad_value: int,
    columns: np.ndarray,  # (Cg*KH*KW, OH*OW), written
) -> None:
    """Receptive fields as rows; padding reads the zero point (the quantised real zero)."""
    channels, height, width = image.shape
    taps = kernel_h * kernel_w
    pad = columns.dtype.type(pad_value)
    for row in range(channels * taps):
        c = row // taps
        ki = (row % taps) // kernel_w
        kj = row % kernel_w
        dest = columns[row]
        for oy in range(out_h):
            iy = oy * stride_h - pad_top + ki * dilation_h
            base = oy * out_w
            if iy < 0 or iy >= height:
                for ox in range(out_w):
                    dest[base + ox] = pad
                continue
            source = image[c, iy]
            for ox in range(out_w):
                ix = ox * stride_w - pad_left + kj * dilation_w
                dest[base + ox] = source[ix] if 0 <= ix < width else pad


@numba.njit(inline="always", cache=True)
def requantized(
    acc: int, multiplier: float, y_scale: float, zero_point: int, lo: int, hi: int, kind: int, act: tuple
) -> float:
    """One accumulator -> the quantised output value (as a float holding an integer)."""
    v = np.float32(np.float32(acc) * np.float32(multiplier))
    if kind == 1:
        v = max(v, np.float32(0.0))
    elif kind != 0:
        ys = np.float32(y_scale)
        v = np.float32(activate(v * ys, kind, act[0], act[1], act[2]) / ys)
    q = np.rint(v) + np.float32(zero_point)
    return min(max(q, lo), hi)


@numba.njit(parallel=True, cache=True)
def gemm_requantize(
    weights: np.ndarray,  # (M, K) int8
    columns: np.ndarray,  # (K, P) 8-bit
    bias: np.ndarray,  # (M,) int32, zero-point correction included
    multiplier: np.ndarray,  # (M,) float32
    y_scale: float,
    zero_point: int,
    lo: int,
    hi: int,
    float_output: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    out: np.ndarray,  # (M, P): 8-bit, or float32 if float_output
) -> None:
    rows, depth = weights.shape
    pixels = columns.shape[1]
    row_blocks = (rows + ROW_BLOCK - 1) // ROW_BLOCK
    column_blocks = (pixels + COLUMN_BLOCK - 1) // COLUMN_BLOCK
    act = (alpha, low, high)
    for task in numba.prange(row_blocks * column_blocks):
        m0 = (task // column_blocks) * ROW_BLOCK
        p0 = (task % column_blocks) * COLUMN_BLOCK
        m1 = min(m0 + ROW_BLOCK, rows)
        p1 = min(p0 + COLUMN_BLOCK, pixels)
        width = p1 - p0
        acc = np.zeros((ROW_BLOCK, COLUMN_BLOCK), dtype=np.int32)
        for k in range(depth):
            source = columns[k, p0:p1]
            for i in range(m1 - m0):
                w = np.int32(weights[m0 + i, k])
                if w != 0:
                    target = acc[i]
                    for p in range(width):
                        target[p] += w * np.int32(source[p])
        for i in range(m1 - m0):
            m = m0 + i
            b = bias[m]
            for p in range(width):
                total = acc[i, p] + b
                if float_output:
                    v = np.float32(np.float32(total) * multiplier[m])
                    out[m, p0 + p] = activate(v, kind, alpha, low, high)
                else:
                    out[m, p0 + p] = requantized(total, multiplier[m], y_scale, zero_point, lo, hi, kind, act)


@numba.njit(cache=True)
def conv_int8(
    x: np.ndarray,  # (N, C, H, W) 8-bit
    weights: np.ndarray,  # (G, Mg, Kg) int8
    bias: np.ndarray,  # (M,) int32
    multiplier: np.ndarray,  # (M,) float32
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    x_zero_point: int,
    y_scale: float,
    zero_point: int,
    lo: int,
    hi: int,
    float_output: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    columns: np.ndarray,  # (Kg, OH*OW) scratch, x's dtype
    out: np.ndarray,  # (N, M, OH, OW): 8-bit, or float32 if float_output
) -> None:
    """Per image and group: im2col (pointwise convolutions read the image directly), then the GEMM."""
    batch = x.shape[0]
    groups, per_group, _ = weights.shape
    in_per_group = x.shape[1] // groups
    out_h, out_w = out.shape[2], out.shape[3]
    pointwise = (
        kernel_h == 1 and kernel_w == 1 and stride_h == 1 and stride_w == 1 and pad_top == 0 and pad_left == 0
    )
    for n in range(batch):
        for g in range(groups):
            image = x[n, g * in_per_group : (g + 1) * in_per_group]
            if pointwise:
                cols = image.reshape((in_per_group, out_h * out_w))
            else:
                im2col_q(
                    image,
                    kernel_h,
                    kernel_w,
                    stride_h,
                    stride_w,
                    pad_top,
                    pad_left,
                    dilation_h,
                    dilation_w,
                    out_h,
                    out_w,
                    x_zero_point,
                    columns,
                )
                cols = columns
            c0, c1 = g * per_group, (g + 1) * per_group
            gemm_requantize(
                weights[g],
                cols,
                bias[c0:c1],
                multiplier[c0:c1],
                y_scale,
                zero_point,
                lo,
                hi,
                float_output,
                kind,
                alpha,
                low,
                high,
                out[n, c0:c1].reshape((per_group, out_h * out_w)),
            )


@numba.njit(parallel=True, cache=True)
def dense_int8(
    a: np.ndarray,  # (M, K) 8-bit
    weights: np.ndarray,  # (N, K) int8
    bias: np.ndarray,  # (N,) int32
    multiplier: np.ndarray,  # (N,) float32
    y_scale: float,
    zero_point: int,
    lo: int,
    hi: int,
    float_output: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    out: np.ndarray,  # (M, N): 8-bit, or float32 if float_output
) -> None:
    """Dot products of contiguous int8 rows, int32 accumulation; parallel over output columns."""
    rows, depth = a.shape
    columns = weights.shape[0]
    act = (alpha, low, high)
    for j in numba.prange(columns):
        w = weights[j]
        for i in range(rows):
            x = a[i]
            acc = np.int32(0)
            for k in range(depth):
                acc += np.int32(x[k]) * np.int32(w[k])
            total = acc + bias[j]
            if float_output:
                v = np.float32(np.float32(total) * multiplier[j])
                out[i, j] = activate(v, kind, alpha, low, high)
            else:
                out[i, j] = requantized(total, multiplier[j], y_scale, zero_point, lo, hi, kind, act)
