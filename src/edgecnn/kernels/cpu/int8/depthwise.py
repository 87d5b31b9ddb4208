"""Direct int8 depthwise convolution (QLinearConv / Int8Conv with one filter per channel).

The im2col + GEMM path spends a GEMM call on every 1-row matrix of a depthwise layer; this loops
directly instead, parallel over (image, channel, band of output rows), one contiguous share of
them per worker. For each task the worker copies the rows the band reads into its own buffer with
the input zero point subtracted (so padding is 0 and the bias needs no zero-point correction), the
columns dealt into stride phases so that every tap of an output row is one contiguous run. A 3x3
filter sums its nine taps in registers; other filters add tap by tap. The int32 sums of each
output row then go through the requantising epilogue (bias included, per-channel multiplier,
activation, rounding, output zero point, saturation) in a loop of its own: inside the tap loop,
its branches on the activation kind would leave that loop scalar.

The buffers hold int16 (x - zx); each tap is widened to int32 and multiplied by the tap's weight,
summed in int32, vectorised across the output row (vpmulld on sign-extended words; LLVM picks
vpmaddwd or, with VNNI, vpdpwssd where its cost model prefers them). Padding reads 0, the real zero.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.gemm.epilogue import activate
from edgecnn.kernels.cpu.int8.loops import requantized
from edgecnn.kernels.cpu.int8.steps import Int8ConvKernel, W, byte_scratch, when_conv
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.threads import call, current_threads, max_threads, worker_share
from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning
from edgecnn.kernels.registry import StepFn

BAND_BYTES = 16384
"""Most bytes of one task's row buffer (a band of rows stays in the L1 cache while its taps run)."""

TASKS_PER_THREAD = 4
"""Bands per thread an image's planes are cut into at least, so the threads share the work evenly."""


@numba.njit(inline="always", cache=True)
def tap_start(offset: int, stride: int, phase_w: int) -> int:
    """Where padded column ``offset`` (a tap's, for output column 0) sits in a phased row."""
    return offset % stride * phase_w + offset // stride


@numba.njit(inline="always", cache=True)
def _deal_pairs(
    row: np.ndarray, x0: int, x1: int, pad_left: int, phase_w: int, zp: np.int16, dest: np.ndarray
) -> None:
    """Stride 2: input columns x0..x1 (less ``zp``) to padded columns x + pad_left, even ones to the
    first phase of ``dest``, odd ones to the second. Pairs are read in one loop (LLVM vectorises
    the interleaved loads), after a leading odd column and before a trailing even one."""
    c = x0 + pad_left
    x = x0
    if c % 2 == 1:
        dest[phase_w + c // 2] = np.int16(row[x]) - zp
        c += 1
        x += 1
    pairs = (x1 - x) // 2
    source = row[x:]
    evens = dest[c // 2 :]
    odds = dest[phase_w + c // 2 :]
    for i in range(pairs):
        evens[i] = np.int16(source[2 * i]) - zp
        odds[i] = np.int16(source[2 * i + 1]) - zp
    if (x1 - x) % 2 == 1:
        dest[(c + 2 * pairs) // 2] = np.int16(row[x1 - 1]) - zp


@numba.njit(inline="always", cache=True)
def fill_band(
    plane: np.ndarray,  # (H, W) 8-bit
    first_row: int,  # input row of the buffer's row 0 (may be negative: padding)
    pad_left: int,
    stride_w: int,
    x_zero_point: int,
    band: np.ndarray,  # (rows, stride_w * phase_w) int16, written
) -> None:
    """band[r, phase(X)] = plane[first_row + r, X - pad_left] - x_zero_point for padded column X,
    0 outside the plane; column X goes to X % stride_w * phase_w + X // stride_w."""
    height, width = plane.shape
    rows, span = band.shape
    phase_w = span // stride_w
    x0 = max(0, -pad_left)
    x1 = min(width, span - pad_left)
    zp = np.int16(x_zero_point)
    for r in range(rows):
        dest = band[r]
        dest[:] = 0
        iy = first_row + r
        if iy < 0 or iy >= height or x1 <= x0:
            continue
        source = plane[iy]
        if stride_w == 1:
            line = source[x0:x1]
            target = dest[x0 + pad_left :]
            for i in range(x1 - x0):
                target[i] = np.int16(line[i]) - zp
        elif stride_w == 2:
            _deal_pairs(source, x0, x1, pad_left, phase_w, zp, dest)
        else:
            for phase in range(stride_w):
                first = x0 + pad_left  # the phase's first padded column at or after the plane's start
                first += (phase - first % stride_w) % stride_w
                count = max(0, (x1 + pad_left - first + stride_w - 1) // stride_w)
                line = source[first - pad_left :]
                target = dest[phase * phase_w + first // stride_w :]
                for i in range(count):
                    target[i] = np.int16(line[i * stride_w]) - zp


@numba.njit(inline="always", cache=True)
def finish_row(
    acc: np.ndarray,  # (OW,) int32 sums, bias included
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
    """The epilogue over one output row. The common kinds (none, ReLU, Clip) get loops of their own
    with the kind a constant, so that no per-pixel branch is left and each loop vectorises."""
    if float_output:
        for p in range(acc.shape[0]):
            v = np.float32(np.float32(acc[p]) * multiplier)
            row[p] = activate(v, kind, act[0], act[1], act[2])
    elif kind == 0:
        for p in range(acc.shape[0]):
            row[p] = requantized(acc[p], multiplier, y_scale, zero_point, lo, hi, 0, act)
    elif kind == 1:
        for p in range(acc.shape[0]):
            row[p] = requantized(acc[p], multiplier, y_scale, zero_point, lo, hi, 1, act)
    elif kind == 3:
        for p in range(acc.shape[0]):
            row[p] = requantized(acc[p], multiplier, y_scale, zero_point, lo, hi, 3, act)
    else:
        for p in range(acc.shape[0]):
            row[p] = requantized(acc[p], multiplier, y_scale, zero_point, lo, hi, kind, act)


@numba.njit(parallel=True, cache=True, nogil=True)
def depthwise_int8(
    x: np.ndarray,  # (N, C, H, W) 8-bit
    taps: np.ndarray,  # (C, KH * KW) int16
    bias: np.ndarray,  # (C,) int32, no zero-point correction
    multiplier: np.ndarray,  # (C,) float32
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
    band_rows: int,
    workers: int,
    out: np.ndarray,  # (N, C, OH, OW): 8-bit, or float32 if float_output
) -> None:
    """Tasks of one band of output rows of one channel of one image (see the module's doc), in one
    contiguous share per worker, each worker with buffers of its own.

    A buffer row is ``span`` wide and output pixel (r, ox) of the band reads flat element
    r * stride_h * span + ox + (the tap's offset). At unit row stride the band is one long run
    (the columns past the output row's end computed and dropped), so narrow maps still fill whole
    vectors; otherwise each output row is a run of its own."""
    batch, channels = x.shape[0], x.shape[1]
    out_h, out_w = out.shape[2], out.shape[3]
    bands = (out_h + band_rows - 1) // band_rows
    phase_w = out_w + ((kernel_w - 1) * dilation_w) // stride_w
    span = stride_w * phase_w
    most_rows = (band_rows - 1) * stride_h + (kernel_h - 1) * dilation_h + 1
    tasks = batch * channels * bands
    act = (alpha, low, high)
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, tasks)
        band = np.empty((most_rows, span), dtype=np.int16)
        flat = band.reshape(-1)
        acc = np.empty(band_rows * span, dtype=np.int32)
        for task in range(first, end):
            n = task // (channels * bands)
            c = (task // bands) % channels
            oy0 = (task % bands) * band_rows
            count = min(out_h, oy0 + band_rows) - oy0
            rows = (count - 1) * stride_h + (kernel_h - 1) * dilation_h + 1
            fill_band(x[n, c], oy0 * stride_h - pad_top, pad_left, stride_w, x_zero_point, band[:rows])
            w = taps[c]
            b = bias[c]
            runs, length = (1, (count - 1) * span + out_w) if stride_h == 1 else (count, out_w)
            if kernel_h == 3 and kernel_w == 3:
                w0, w1, w2 = np.int32(w[0]), np.int32(w[1]), np.int32(w[2])
                w3, w4, w5 = np.int32(w[3]), np.int32(w[4]), np.int32(w[5])
                w6, w7, w8 = np.int32(w[6]), np.int32(w[7]), np.int32(w[8])
                s0 = tap_start(0, stride_w, phase_w)
                s1 = tap_start(dilation_w, stride_w, phase_w)
                s2 = tap_start(2 * dilation_w, stride_w, phase_w)
                d1, d2 = dilation_h * span, 2 * dilation_h * span
                for r in range(runs):
                    at = r * stride_h * span
                    a0, a1, a2 = flat[at + s0 :], flat[at + s1 :], flat[at + s2 :]
                    b0, b1, b2 = flat[at + d1 + s0 :], flat[at + d1 + s1 :], flat[at + d1 + s2 :]
                    c0, c1, c2 = flat[at + d2 + s0 :], flat[at + d2 + s1 :], flat[at + d2 + s2 :]
                    sums = acc[r * span :]
                    for p in range(length):
                        sums[p] = (
                            np.int32(a0[p]) * w0 + np.int32(a1[p]) * w1 + np.int32(a2[p]) * w2
                            + np.int32(b0[p]) * w3 + np.int32(b1[p]) * w4 + np.int32(b2[p]) * w5
                            + np.int32(c0[p]) * w6 + np.int32(c1[p]) * w7 + np.int32(c2[p]) * w8
                            + b
                        )  # fmt: skip
            else:
                for r in range(runs):
                    at = r * stride_h * span
                    sums = acc[r * span : r * span + length]
                    sums[:] = b
                    for ki in range(kernel_h):
                        for kj in range(kernel_w):
                            weight = np.int32(w[ki * kernel_w + kj])
                            line = flat[
                                at + ki * dilation_h * span + tap_start(kj * dilation_w, stride_w, phase_w) :
                            ]
                            for p in range(length):
                                sums[p] += np.int32(line[p]) * weight
            target = out[n, c]
            for r in range(count):
                finish_row(
                    acc[r * span : r * span + out_w],
                    multiplier[c],
                    y_scale,
                    zero_point,
                    lo,
                    hi,
                    float_output,
                    kind,
                    act,
                    target[oy0 + r],
                )


class Int8DepthwiseKernel(Int8ConvKernel):
    """Int8ConvKernel's layer with one filter per channel, run by ``depthwise_int8``: the weights
    as int16 taps per channel, the bias without the zero-point correction (the buffers hold
    x - zx)."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        w = values[W]
        assert w is not None
        channels = w.shape[0]
        self.taps = np.ascontiguousarray(w.reshape(channels, -1), dtype=np.int16)
        sums = self.taps.astype(np.int64).sum(axis=1)
        self.bias = np.ascontiguousarray(self.bias.astype(np.int64) + self.x_zp * sums, dtype=np.int32)
        kh, kw, sh, sw, _, _, dh, dw = self.geometry
        out_h, out_w = self.out_hw
        span = sw * (out_w + ((kw - 1) * dw) // sw)
        threads = max(1, max_threads())
        fit = max(1, (BAND_BYTES // (2 * span) - (kh - 1) * dh - 1) // sh + 1)
        planes = self.out_shape[0] * channels
        bands = -(-threads * TASKS_PER_THREAD // planes)
        self.band_rows = max(1, min(out_h, fit, -(-out_h // bands)))
        macs = self.out_shape[0] * channels * out_h * out_w * kh * kw
        self.small = macs < active_cpu_tuning().conv_gemm_grain

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the planned shape and type); float input is quantised
        into scratch first."""
        q = self.quantized_input(x, byte_scratch(self.input_bytes(x)))
        call(
            depthwise_int8,
            self.small,
            q,
            self.taps,
            self.bias,
            self.multiplier,
            *self.geometry,
            self.x_zp,
            *self.epilogue_args(),
            self.band_rows,
            1 if self.small else current_threads(),
            out,
        )


def when_depthwise(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """One filter per channel (group == input channels == output channels)."""
    if not when_conv(node, types, values):
        return False
    w = values[W]
    x = types[0]
    assert w is not None and x is not None and x.shape is not None
    group = node.attrs.group
    return group > 1 and w.shape[1] == 1 and w.shape[0] == group and x.shape[1] == group


def int8_depthwise(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> StepFn:
    return Int8DepthwiseKernel(node, types, values)


register("int8_depthwise", int8_depthwise, when=when_depthwise)

__all__ = ["Int8DepthwiseKernel"]
