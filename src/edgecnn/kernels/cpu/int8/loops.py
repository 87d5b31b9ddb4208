"""Compiled loops of the int8 kernels: quantise, im2col on 8-bit data, int8 x int8 -> int32 GEMM
with the requantising epilogue (int32 bias, per-channel multiplier, activation, saturation).

The GEMM accumulates a block of 4 output rows x 256 columns in int32: for each k, a row of the
column matrix is widened once and multiplied into the four weight rows (vectorised over the
columns; int8 x 8-bit products fit int16, which halves the multiply width). Numba emits no
VNNI/dot-product instructions, so this does not beat float32 BLAS; it is here to make int8 models
run, with their int8 rounding, on any CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core.base import BaseContext
from numba.core.types import Type
from numba.core.typing import Signature
from numba.core.typing.context import BaseContext as TypingContext

from edgecnn.kernels.cpu.gemm.epilogue import F32, activate
from edgecnn.kernels.cpu.gemm.microkernel import Codegen, _intrinsic

ROW_BLOCK = 4
COLUMN_BLOCK = 256


ROUNDING = np.float32(12582912.0)  # 1.5 * 2**23: adding and subtracting it rounds half to even
ROUNDING_LIMIT = np.float32(4194304.0)  # 2**22: beyond it every 8-bit result saturates anyway


@numba.njit(inline="always", cache=True)
def saturated(v: F32, zero_point: int, lo: int, hi: int) -> float:
    """clamp(round_half_even(v) + zero_point, lo, hi) in float32, as np.rint would round (the
    magic-number rounding vectorises; np.rint in compiled loops is a libm call per value)."""
    v = min(max(np.float32(v), -ROUNDING_LIMIT), ROUNDING_LIMIT)
    q = ((v + ROUNDING) - ROUNDING) + np.float32(zero_point)
    return min(max(q, np.float32(lo)), np.float32(hi))


@_intrinsic
def fma32(typingctx: TypingContext, x: Type, y: Type, z: Type) -> tuple[Signature, Codegen]:
    """float32 x * y + z rounded once (``llvm.fma.f32``: the FMA instruction where the CPU has it,
    an exact library call where not; a loop of them vectorises)."""
    signature = types.float32(types.float32, types.float32, types.float32)

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
    ) -> ir.Value:
        f32 = ir.FloatType()
        fma = builder.module.declare_intrinsic("llvm.fma", [f32], ir.FunctionType(f32, [f32, f32, f32]))
        return builder.call(fma, args)

    return signature, codegen


@numba.njit(nogil=True, cache=True)
def add_span(
    a: np.ndarray,
    b: np.ndarray,
    ratio_a: np.float32,
    ratio_b: np.float32,
    fixed: np.float32,
    low: np.float32,
    high: np.float32,
    out: np.ndarray,
    start: int,
    count: int,
) -> None:
    """QLinearAdd of ``count`` elements from ``start`` (eltwise.qlinear_add_into; the residual
    epilogue of dot_gemm.py): out = clamp(rint(fma(a, ratio_a, fma(b, ratio_b, fixed))), low, high)
    in float32, as onnxruntime computes it. Unsigned offsets keep the loop free of negative-index
    checks, so it vectorises; ``out`` must not overlap ``a`` or ``b`` (LLVM's overlap test would
    send the loop to its scalar form)."""
    first = np.uint64(start)
    for i in range(np.uint64(count)):
        v = added(np.float32(a[first + i]), np.float32(b[first + i]), ratio_a, ratio_b, fixed, low, high)
        out[first + i] = np.int32(v)


@numba.njit(inline="always", cache=True)
def added(
    a: F32, b: F32, ratio_a: F32, ratio_b: F32, fixed: F32, low: F32, high: F32
) -> F32:  # fmt: skip
    """One QLinearAdd output as an integral float32: clamp(rint(fma(a, ratio_a, fma(b, ratio_b,
    fixed))), low, high)."""
    v = fma32(a, ratio_a, fma32(b, ratio_b, fixed))
    v = min(max(v, -ROUNDING_LIMIT), ROUNDING_LIMIT)
    return min(max((v + ROUNDING) - ROUNDING, low), high)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _quantize_span(
    x: np.ndarray, s: np.float32, zero_point: int, lo: int, hi: int, out: np.ndarray, start: int, count: int
) -> None:
    """``count`` elements of quantize_into from ``start``: unsigned offsets and numpy's error model
    (no zero-divisor branch) keep the loop free of checks, so it vectorises."""
    first = np.uint64(start)
    for i in range(np.uint64(count)):
        out[first + i] = saturated(np.float32(x[first + i]) / s, zero_point, lo, hi)


@numba.njit(parallel=True, cache=True, nogil=True)
def quantize_into(x: np.ndarray, scale: float, zero_point: int, lo: int, hi: int, out: np.ndarray) -> None:
    """out = clamp(rint(x / scale) + zero_point, lo, hi) over flat arrays (QuantizeLinear)."""
    s = np.float32(scale)
    n = x.shape[0]
    chunk = 16384
    for block in numba.prange((n + chunk - 1) // chunk):
        start = block * chunk
        _quantize_span(x, s, zero_point, lo, hi, out, start, min(n, start + chunk) - start)


@numba.njit(parallel=True, cache=True, nogil=True)
def dequantize_into(x: np.ndarray, scale: float, zero_point: int, out: np.ndarray) -> None:
    """out = float32(x - zero_point) * scale over flat arrays (DequantizeLinear, per tensor)."""
    s = np.float32(scale)
    n = x.shape[0]
    chunk = 16384
    for block in numba.prange((n + chunk - 1) // chunk):
        for i in range(block * chunk, min(n, block * chunk + chunk)):
            out[i] = np.float32(np.int32(x[i]) - zero_point) * s


@numba.njit(inline="always", cache=True)
def receptive_row(
    image: np.ndarray,  # (Cg, H, W) 8-bit
    row: int,  # (c, ki, kj) flattened
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
    dest: np.ndarray,  # (OH*OW,) written
) -> None:
    """One row of the im2col matrix: tap (ki, kj) of channel c at every output pixel; padding
    reads the zero point (the quantised real zero). The columns that read inside the image are
    found once, so the copies carry no tests."""
    height, width = image.shape[1], image.shape[2]
    taps = kernel_h * kernel_w
    pad = dest.dtype.type(pad_value)
    c = row // taps
    ki = (row % taps) // kernel_w
    kj = row % kernel_w
    x_offset = kj * dilation_w - pad_left
    x_lo = 0 if x_offset >= 0 else min(out_w, (-x_offset + stride_w - 1) // stride_w)
    last = width - 1 - x_offset
    x_hi = max(x_lo, 0 if last < 0 else min(out_w, last // stride_w + 1))
    for oy in range(out_h):
        iy = oy * stride_h - pad_top + ki * dilation_h
        segment = dest[oy * out_w : (oy + 1) * out_w]
        if iy < 0 or iy >= height:
            segment[:] = pad
            continue
        segment[:x_lo] = pad
        source = image[c, iy]
        start = x_lo * stride_w + x_offset
        if stride_w == 1:
            segment[x_lo:x_hi] = source[start : start + x_hi - x_lo]
        else:
            for ox in range(x_lo, x_hi):
                segment[ox] = source[ox * stride_w + x_offset]
        segment[x_hi:] = pad


@numba.njit(parallel=True, cache=True, nogil=True)
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
    """Receptive fields as rows (``receptive_row``)."""
    for row in numba.prange(columns.shape[0]):
        receptive_row(
            image, row, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left,
            dilation_h, dilation_w, out_h, out_w, pad_value, columns[row],
        )  # fmt: skip


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
    return saturated(v, zero_point, lo, hi)


@numba.njit(inline="always", cache=True)
def biased(total: Any, bias: Any) -> Any:
    """int32(total) + bias in int32, as the reference sums: numba types an int32 + int32 sum as
    int64, which would leave the epilogue converting int64 lanes; cut back, it is one 32-bit add."""
    return np.int32(np.int32(total) + bias)


@numba.njit(inline="always", cache=True)
def finish_row(
    acc: np.ndarray,  # (OW,) sums without the bias: int32, or float32 holding integers
    bias: np.int32,
    multiplier: float,
    y_scale: float,
    zero_point: int,
    lo: int,
    hi: int,
    float_output: bool,
    kind: int,
    act: tuple,
    row: np.ndarray,  # (OW,) written: 8-bit, or float32 if float_output
) -> None:
    """The epilogue over one run of outputs (``biased`` sums). The common kinds (none, ReLU, Clip)
    get loops of their own with the kind a constant, so that no per-pixel branch is left and each
    loop vectorises."""
    if float_output:
        for p in range(acc.shape[0]):
            v = np.float32(np.float32(biased(acc[p], bias)) * multiplier)
            row[p] = activate(v, kind, act[0], act[1], act[2])
    elif kind == 0:
        for p in range(acc.shape[0]):
            row[p] = requantized(biased(acc[p], bias), multiplier, y_scale, zero_point, lo, hi, 0, act)
    elif kind == 1:
        for p in range(acc.shape[0]):
            row[p] = requantized(biased(acc[p], bias), multiplier, y_scale, zero_point, lo, hi, 1, act)
    elif kind == 3:
        for p in range(acc.shape[0]):
            row[p] = requantized(biased(acc[p], bias), multiplier, y_scale, zero_point, lo, hi, 3, act)
    else:
        for p in range(acc.shape[0]):
            row[p] = requantized(biased(acc[p], bias), multiplier, y_scale, zero_point, lo, hi, kind, act)


@numba.njit(inline="always", cache=True)
def accumulate_rows4(
    weights: np.ndarray, columns: np.ndarray, m0: int, p0: int, p1: int, acc: np.ndarray
) -> None:
    """acc[0:4, :p1-p0] += weights[m0:m0+4] @ columns[:, p0:p1]: each widened column value feeds
    four rows; products in int16 (|w| <= 127 times an 8-bit value fits), sums in int32."""
    a0, a1, a2, a3 = acc[0], acc[1], acc[2], acc[3]
    for k in range(weights.shape[1]):
        source = columns[k, p0:p1]
        w0, w1 = np.int16(weights[m0, k]), np.int16(weights[m0 + 1, k])
        w2, w3 = np.int16(weights[m0 + 2, k]), np.int16(weights[m0 + 3, k])
        for p in range(p1 - p0):
            v = np.int16(source[p])
            a0[p] += np.int32(np.int16(w0 * v))
            a1[p] += np.int32(np.int16(w1 * v))
            a2[p] += np.int32(np.int16(w2 * v))
            a3[p] += np.int32(np.int16(w3 * v))


@numba.njit(inline="always", cache=True)
def accumulate_row(
    weights: np.ndarray, columns: np.ndarray, m: int, p0: int, p1: int, acc: np.ndarray
) -> None:
    """One row of the block (the rows left over after blocks of four)."""
    for k in range(weights.shape[1]):
        source = columns[k, p0:p1]
        w = np.int16(weights[m, k])
        for p in range(p1 - p0):
            acc[p] += np.int32(np.int16(w * np.int16(source[p])))


@numba.njit(parallel=True, cache=True, nogil=True)
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
    rows = weights.shape[0]
    pixels = columns.shape[1]
    row_blocks = (rows + ROW_BLOCK - 1) // ROW_BLOCK
    column_blocks = (pixels + COLUMN_BLOCK - 1) // COLUMN_BLOCK
    act = (alpha, low, high)
    for task in numba.prange(row_blocks * column_blocks):
        m0 = (task // column_blocks) * ROW_BLOCK
        p0 = (task % column_blocks) * COLUMN_BLOCK
        m1 = min(m0 + ROW_BLOCK, rows)
        p1 = min(p0 + COLUMN_BLOCK, pixels)
        acc = np.zeros((ROW_BLOCK, COLUMN_BLOCK), dtype=np.int32)
        if m1 - m0 == ROW_BLOCK:
            accumulate_rows4(weights, columns, m0, p0, p1, acc)
        else:
            for i in range(m1 - m0):
                accumulate_row(weights, columns, m0 + i, p0, p1, acc[i])
        for i in range(m1 - m0):
            m = m0 + i
            b = bias[m]
            for p in range(p1 - p0):
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
    pointwise: bool,  # 1x1 kernel, unit strides, no padding on any side: the image is the matrix
    columns: np.ndarray,  # (Kg, OH*OW) scratch, x's dtype
    out: np.ndarray,  # (N, M, OH, OW): 8-bit, or float32 if float_output
) -> None:
    """Per image and group: im2col (pointwise convolutions read the image directly), then the GEMM."""
    batch = x.shape[0]
    groups, per_group, _ = weights.shape
    in_per_group = x.shape[1] // groups
    out_h, out_w = out.shape[2], out.shape[3]
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


@numba.njit(parallel=True, cache=True, nogil=True)
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
