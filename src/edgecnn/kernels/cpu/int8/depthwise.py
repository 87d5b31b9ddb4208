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

Small planes (7x7, 14x14) leave that loop few vectors per plane and the per-plane work (buffer
fill, epilogue calls on rows shorter than a vector) dominating; they run channels-last instead
(``depthwise_int8_lanes``): a block of channels shares the vector lanes, as in NHWC depthwise
kernels, so every tap is one multiply-add over the block whatever the plane's size or stride.

3x3 layers whose planes suit them run the float depthwise kernel's plane passes instead (conv/
depthwise.py: flat loops on unsigned offsets, no views, all nine taps in one pass) on float32
copies of the codes: the sums are integers below 2^24, which float32 holds exactly whatever the
order of the additions, so the epilogue sees the same int32 sums. ``flat_path`` picks them: the
masked pass for small padded stride-1 planes (14x14 and 7x7 in MobileNetV2), the phased pass for
stride-2 planes whose four phases fit in BAND_BYTES.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.depthwise import (
    SAME_MAX_WIDTH,
    column_masks,
    fill_phases,
    phased_plane_3x3,
    same_plane_3x3,
)
from edgecnn.kernels.cpu.gemm.microkernel import LANES
from edgecnn.kernels.cpu.int8.loops import finish_row
from edgecnn.kernels.cpu.int8.steps import Int8ConvKernel, W, byte_scratch, when_conv
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.threads import call, current_threads, max_threads, worker_share
from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning
from edgecnn.kernels.registry import StepFn

BAND_BYTES = 16384
"""Most bytes of one task's row buffer (a band of rows stays in the L1 cache while its taps run)."""

CHANNEL_LANES = 2 * LANES
"""Channels per task of ``depthwise_int8_lanes``: two int32 vectors (their int16 buffer, one 64-byte
line per pixel on AVX-512)."""

SMALL_PLANE = 16 * LANES
"""Output pixels per plane below which a layer runs channels-last (``depthwise_int8_lanes``): the
plane-by-plane loop's runs are then too few vectors long to pay for its per-plane work."""

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
                        )  # fmt: skip
            else:
                for r in range(runs):
                    at = r * stride_h * span
                    sums = acc[r * span : r * span + length]
                    sums[:] = 0
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
                    b,
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


@numba.njit(parallel=True, cache=True, nogil=True)
def depthwise_int8_lanes(
    x: np.ndarray,  # (N, C, H, W) 8-bit
    taps: np.ndarray,  # (blocks, KH * KW, lanes) int32, 0 past the last channel
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
    out_w: int,
    workers: int,
    out: np.ndarray,  # (N, C, OH * OW): 8-bit, or float32 if float_output
) -> None:
    """Channels in the vector lanes, for small planes: tasks of (image, block of ``lanes``
    channels, band of output rows), one contiguous share per worker.

    The band's input rows of the block are copied channels-last into the worker's buffer (each
    pixel's ``lanes`` channels side by side, x - zx; padding and channels past the last 0), the
    columns dealt into stride phases as ``fill_band`` does, so that one tap over a whole output row
    is one contiguous run of out_w * lanes values whatever the plane's width; the tap weights are
    tiled to that length once per task. The copy reads each pixel's channels (one byte per plane)
    and writes them side by side: that order costs less than writing one plane's pixels ``lanes``
    apart. The sums then go back channel by channel, bias added, each channel's band of output
    rows one contiguous run through the epilogue."""
    batch, channels, height, width = x.shape
    blocks, count_taps, lanes = taps.shape
    out_h = out.shape[2] // out_w
    bands = (out_h + band_rows - 1) // band_rows
    phase_w = out_w + ((kernel_w - 1) * dilation_w) // stride_w
    span = stride_w * phase_w
    most_rows = (band_rows - 1) * stride_h + (kernel_h - 1) * dilation_h + 1
    x0 = max(0, -pad_left)
    x1 = min(width, span - pad_left)
    zp = np.int16(x_zero_point)
    run = out_w * lanes
    starts = np.empty(stride_w, dtype=np.int64)  # per column phase: first input column,
    lengths = np.empty(stride_w, dtype=np.int64)  # columns of the plane in the phase,
    heads = np.empty(stride_w, dtype=np.int64)  # and where the first goes in a buffer row
    for phase in range(stride_w):
        col = x0 + pad_left  # the phase's first padded column at or after the plane's start
        col += (phase - col % stride_w) % stride_w
        starts[phase] = col - pad_left
        lengths[phase] = max(0, (x1 + pad_left - col + stride_w - 1) // stride_w)
        heads[phase] = phase * phase_w + col // stride_w
    tasks = batch * blocks * bands
    act = (alpha, low, high)
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, tasks)
        flat = np.empty(most_rows * span * lanes, dtype=np.int16)
        acc = np.empty(band_rows * run, dtype=np.int32)
        tiles = np.empty((count_taps, run), dtype=np.int32)
        column = np.empty(band_rows * out_w, dtype=np.int32)
        for task in range(first, end):
            n = task // (blocks * bands)
            block = (task // bands) % blocks
            oy0 = (task % bands) * band_rows
            count = min(out_h, oy0 + band_rows) - oy0
            rows = (count - 1) * stride_h + (kernel_h - 1) * dilation_h + 1
            c0 = block * lanes
            cb = min(lanes, channels - c0)
            flat[: rows * span * lanes] = 0
            top = oy0 * stride_h - pad_top
            for r in range(max(0, -top), min(rows, height - top)):
                for phase in range(stride_w):
                    start, length, at = starts[phase], lengths[phase], (r * span + heads[phase]) * lanes
                    for i in range(length):
                        source = x[n, c0:, top + r, start + i * stride_w]
                        dest = flat[at + i * lanes :]
                        for j in range(cb):
                            dest[j] = np.int16(source[j]) - zp
            for t in range(count_taps):
                for ox in range(out_w):
                    tiles[t, ox * lanes : (ox + 1) * lanes] = taps[block, t]
            for r in range(count):
                sums = acc[r * run : (r + 1) * run]
                at = r * stride_h * span
                if kernel_h == 3 and kernel_w == 3:
                    s0 = tap_start(0, stride_w, phase_w) * lanes
                    s1 = tap_start(dilation_w, stride_w, phase_w) * lanes
                    s2 = tap_start(2 * dilation_w, stride_w, phase_w) * lanes
                    d0, d1, d2 = (
                        at * lanes,
                        (at + dilation_h * span) * lanes,
                        (at + 2 * dilation_h * span) * lanes,
                    )
                    a0, a1, a2 = flat[d0 + s0 :], flat[d0 + s1 :], flat[d0 + s2 :]
                    b0, b1, b2 = flat[d1 + s0 :], flat[d1 + s1 :], flat[d1 + s2 :]
                    g0, g1, g2 = flat[d2 + s0 :], flat[d2 + s1 :], flat[d2 + s2 :]
                    w0, w1, w2 = tiles[0], tiles[1], tiles[2]
                    w3, w4, w5 = tiles[3], tiles[4], tiles[5]
                    w6, w7, w8 = tiles[6], tiles[7], tiles[8]
                    for q in range(run):
                        sums[q] = (
                            np.int32(a0[q]) * w0[q] + np.int32(a1[q]) * w1[q] + np.int32(a2[q]) * w2[q]
                            + np.int32(b0[q]) * w3[q] + np.int32(b1[q]) * w4[q] + np.int32(b2[q]) * w5[q]
                            + np.int32(g0[q]) * w6[q] + np.int32(g1[q]) * w7[q] + np.int32(g2[q]) * w8[q]
                        )  # fmt: skip
                else:
                    sums[:] = 0
                    for ki in range(kernel_h):
                        for kj in range(kernel_w):
                            weight = tiles[ki * kernel_w + kj]
                            offset = (
                                at + ki * dilation_h * span + tap_start(kj * dilation_w, stride_w, phase_w)
                            )
                            line = flat[offset * lanes :]
                            for q in range(run):
                                sums[q] += np.int32(line[q]) * weight[q]
            pixels = count * out_w
            for j in range(cb):
                c = c0 + j
                for p in range(pixels):
                    column[p] = acc[p * lanes + j]
                finish_row(
                    column[:pixels],
                    bias[c],
                    multiplier[c],
                    y_scale,
                    zero_point,
                    lo,
                    hi,
                    float_output,
                    kind,
                    act,
                    out[n, c, oy0 * out_w : oy0 * out_w + pixels],
                )


@numba.njit(inline="always", cache=True)
def centred_plane(x: np.ndarray, at: np.uint64, size: np.uint64, zp: np.float32, plane: np.ndarray) -> None:
    """plane[i] = x[at + i] - zp as float32, for i < size (one 8-bit input plane, zero point off)."""
    for i in range(size):
        plane[i] = np.float32(x[at + i]) - zp


@numba.njit(parallel=True, cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def depthwise_int8_same_3x3(
    x: np.ndarray,  # (N, C, H, W) 8-bit
    taps: np.ndarray,  # (C * 9,) float32
    bias: np.ndarray,  # (C,) int32, no zero-point correction
    multiplier: np.ndarray,  # (C,) float32
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
    workers: int,
    out: np.ndarray,  # (N, C, H, W): 8-bit, or float32 if float_output
) -> None:
    """3x3, stride 1, one pixel of padding all round, no dilation, on small planes: each plane
    (x - zx, float32) through the float kernel's flat masked pass (``same_plane_3x3``: no padded
    rows, no views), then the epilogue over the whole plane. The sums are integers below 2^24
    (nine products of at most 255 * 128), so float32 holds every partial sum exactly, in any order."""
    batch, channels, height, width = x.shape
    planes = batch * channels
    size = np.uint64(height * width)
    zp = np.float32(x_zero_point)
    x_flat, out_flat = x.reshape(-1), out.reshape(-1)
    act = (alpha, low, high)
    for worker in numba.prange(workers):
        left, right = column_masks(height, width)
        plane = np.empty(height * width, dtype=np.float32)
        buf = np.zeros(height * width + 2 * (width + 1), dtype=np.float32)
        work = np.empty(height * width, dtype=np.float32)
        for job in range(worker * planes // workers, (worker + 1) * planes // workers):
            c = job % channels
            at = np.uint64(job) * size
            centred_plane(x_flat, at, size, zp, plane)
            same_plane_3x3(
                plane, np.uint64(0), np.uint64(width), size, left, right, taps, np.uint64(c * 9),
                np.float32(0.0), buf, work, np.uint64(0),
            )  # fmt: skip
            finish_row(
                work, bias[c], multiplier[c], y_scale, zero_point, lo, hi, float_output, kind, act,
                out_flat[at : at + size],
            )  # fmt: skip


@numba.njit(parallel=True, cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def depthwise_int8_phased_3x3(
    x: np.ndarray,  # (N, C, H, W) 8-bit
    taps: np.ndarray,  # (C * 9,) float32
    bias: np.ndarray,  # (C,) int32, zero-point corrected (bias - zx * the taps' sum)
    multiplier: np.ndarray,  # (C,) float32
    pad_top: int,
    pad_left: int,
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
    workers: int,
    out: np.ndarray,  # (N, C, OH, OW): 8-bit, or float32 if float_output
) -> None:
    """3x3 at stride 2, no dilation: each plane's codes dealt into its four stride-2 phases and
    summed in one flat pass by the float kernel's ``fill_phases`` and ``phased_plane_3x3``. The
    phase buffers start filled with zx, so the padding reads zx as the codes' zero, and the
    zero-point-corrected bias removes zx * the taps' sum. The sums are integers below 2^24 (nine
    products of at most 255 * 128), so float32 holds every partial sum exactly, in any order. The
    epilogue runs over the whole pass (rows ``pitch`` = OW + 1 apart) into a buffer whose rows are
    then copied out."""
    channels = x.shape[1]
    out_h, out_w = out.shape[2], out.shape[3]
    planes = x.shape[0] * channels
    out_size = out_h * out_w
    pitch = out_w + 1
    plane_cells = (out_h + 1) * pitch
    count = out_h * pitch - 1
    out_flat = out.reshape(-1)
    act = (alpha, low, high)
    for worker in numba.prange(workers):
        phases = np.full((4, out_h + 1, pitch), np.float32(x_zero_point), dtype=np.float32)
        flat = phases.reshape(-1)
        work = np.empty(out_h * pitch, dtype=np.float32)
        staged = np.empty(out_h * pitch, dtype=out.dtype)
        for job in range(worker * planes // workers, (worker + 1) * planes // workers):
            n, c = job // channels, job % channels
            fill_phases(x[n, c], pad_top, pad_left, phases)
            phased_plane_3x3(flat, plane_cells, pitch, taps, np.uint64(c * 9), np.float32(0.0), work, count)
            finish_row(
                work[:count], bias[c], multiplier[c], y_scale, zero_point, lo, hi, float_output, kind, act,
                staged[:count],
            )  # fmt: skip
            at = job * out_size
            for oy in range(out_h):
                out_flat[at + oy * out_w : at + (oy + 1) * out_w] = staged[oy * pitch : oy * pitch + out_w]


def flat_path(geometry: tuple[int, ...], in_hw: tuple[int, ...], out_hw: tuple[int, ...]) -> str:
    """Which float32 plane pass (exact on these sums) a 3x3 layer takes: "same" (stride 1, padding
    1, planes up to SAME_MAX_WIDTH wide) or "phased" (stride 2, undilated, planes above SMALL_PLANE
    outputs whose four phases fit in BAND_BYTES as float32), else "" (the int16 kernels)."""
    kh, kw, sh, sw, top, left, dh, dw = geometry
    out_h, out_w = out_hw
    if (kh, kw) != (3, 3):
        return ""
    if (sh, sw, top, left, dh, dw) == (1, 1, 1, 1, 1, 1) and out_hw == in_hw and out_w <= SAME_MAX_WIDTH:
        return "same"
    if (
        (sh, sw, dh, dw) == (2, 2, 1, 1)
        and out_h * out_w > SMALL_PLANE
        and 16 * (out_h + 1) * (out_w + 1) <= BAND_BYTES
    ):
        return "phased"
    return ""


class Int8DepthwiseKernel(Int8ConvKernel):
    """Int8ConvKernel's layer with one filter per channel, run by a float32 plane pass where
    ``flat_path`` names one (``flat``; the weights as float32 taps), else by ``depthwise_int8``
    (the weights as int16 taps per channel) or, for planes of at most SMALL_PLANE outputs, by
    ``depthwise_int8_lanes`` (``lanes`` > 0; the weights as int32 blocks of ``lanes`` channels per
    tap). ``bias`` is without the zero-point correction (for buffers of x - zx),
    ``corrected_bias`` with it (for the phased pass, whose buffers hold the codes and zx)."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        w = values[W]
        assert w is not None
        channels = w.shape[0]
        self.taps = np.ascontiguousarray(w.reshape(channels, -1), dtype=np.int16)
        sums = self.taps.astype(np.int64).sum(axis=1)
        self.corrected_bias = self.bias
        self.bias = np.ascontiguousarray(self.bias.astype(np.int64) + self.x_zp * sums, dtype=np.int32)
        kh, kw, sh, sw, _, _, dh, dw = self.geometry
        out_h, out_w = self.out_hw
        x_type = types[0]
        assert x_type is not None
        in_hw = tuple(x_type.dims[2:])
        span = sw * (out_w + ((kw - 1) * dw) // sw)
        threads = max(1, max_threads())
        fit = max(1, (BAND_BYTES // (2 * span) - (kh - 1) * dh - 1) // sh + 1)
        planes = self.out_shape[0] * channels
        bands = -(-threads * TASKS_PER_THREAD // planes)
        self.band_rows = max(1, min(out_h, fit, -(-out_h // bands)))
        macs = self.out_shape[0] * channels * out_h * out_w * kh * kw
        self.small = macs < active_cpu_tuning().conv_gemm_grain
        self.flat = flat_path(self.geometry, in_hw, self.out_hw)
        if self.flat:
            self.flat_taps = np.ascontiguousarray(self.taps.reshape(-1), dtype=np.float32)
        self.lanes = CHANNEL_LANES if out_h * out_w <= SMALL_PLANE and not self.flat else 0
        if self.lanes:
            blocks = -(-channels // self.lanes)
            bands = -(-threads * TASKS_PER_THREAD // (self.out_shape[0] * blocks))
            # no L1 bound on the band: the plane is small, and every band builds its tiles anew
            self.band_rows = max(1, min(out_h, -(-out_h // bands)))
            taps = np.zeros((blocks * self.lanes, kh * kw), np.int32)
            taps[:channels] = self.taps
            self.block_taps = np.ascontiguousarray(taps.reshape(blocks, self.lanes, -1).transpose(0, 2, 1))

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the planned shape and type); float input is quantised
        into scratch first."""
        q = self.quantized_input(x, byte_scratch(self.input_bytes(x)))
        workers = 1 if self.small else current_threads()
        if self.flat == "same":
            call(
                depthwise_int8_same_3x3,
                self.small,
                q,
                self.flat_taps,
                self.bias,
                self.multiplier,
                self.x_zp,
                *self.epilogue_args(),
                workers,
                out,
            )
            return
        if self.flat == "phased":
            call(
                depthwise_int8_phased_3x3,
                self.small,
                q,
                self.flat_taps,
                self.corrected_bias,
                self.multiplier,
                *self.geometry[4:6],
                self.x_zp,
                *self.epilogue_args(),
                workers,
                out,
            )
            return
        if self.lanes:
            call(
                depthwise_int8_lanes,
                self.small,
                q,
                self.block_taps,
                self.bias,
                self.multiplier,
                *self.geometry,
                self.x_zp,
                *self.epilogue_args(),
                self.band_rows,
                self.out_hw[1],
                workers,
                out.reshape(out.shape[0], out.shape[1], -1),
            )
            return
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
            workers,
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
