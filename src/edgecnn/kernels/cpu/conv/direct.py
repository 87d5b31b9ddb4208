"""Direct convolution on the micro-kernel (implicit GEMM): no im2col matrix at all.

The input is copied once into a zero-padded frame whose columns are split by the horizontal stride
(``frame[n, c, y, q, j] = padded[n, c, y, j*stride + q]``). Then, for COLUMNS consecutive output pixels
of one output row (16, or 32 with AVX-512), every filter tap (channel, ky, kx) reads its input values
as one contiguous run
of the frame, at an offset that depends on the tap only. The micro-kernel takes those offsets from
a table built at plan time (``micro_kernel_rows``) and multiplies the taps by the packed weights
straight from the frame, one ROWS x COLUMNS block of output channels x output pixels at a time.

Why: im2col writes and re-reads a matrix KH*KW times the input's size, and on strided layers
(ResNet's 7x7/2 stem, SimpleCNN's and MobileNet's 3x3/2 first layers) its gathers cost more than the
multiplications. Runs of COLUMNS pixels waste lanes on narrow maps, so the heuristic keeps this kernel
to maps at least MIN_WIDTH wide (``when_direct``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.setup import ConvKernel, ConvSetup
from edgecnn.kernels.cpu.conv.tiled_gemm import rows_epilogue
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS, ROWS, micro_kernel_rows, micro_kernel_rows_finished
from edgecnn.kernels.cpu.gemm.packed_gemm import DEPTH_BLOCK, ROW_BLOCK, pack_weights
from edgecnn.kernels.cpu.system.common import scratch
from edgecnn.kernels.cpu.system.threads import current_threads, small_conv
from edgecnn.kernels.cpu.system.twins import parallel_and_serial


def frame_shape(s: ConvSetup, run: int = COLUMNS) -> tuple[int, int, int]:
    """(rows, stride phases, columns per phase) of one channel's frame: every padded row an output
    row reads, and every column the ``run``-pixel runs of the last output chunk read."""
    rows = (s.out[0] - 1) * s.strides[0] + (s.kernel[0] - 1) * s.dilations[0] + 1
    reach = (s.kernel[1] - 1) * s.dilations[1] // s.strides[1]
    columns = math.ceil(s.out[1] / run) * run + reach
    return rows, s.strides[1], columns


def tap_offsets(s: ConvSetup, run: int = COLUMNS) -> np.ndarray:
    """Offset in a group's frame (``frame_shape(s, run)``) of each tap (channel, ky, kx) of the
    packed weights' depth order, relative to the first pixel of the output row's run."""
    rows, phases, columns = frame_shape(s, run)
    c, ky, kx = np.meshgrid(
        np.arange(s.in_channels // s.group), np.arange(s.kernel[0]), np.arange(s.kernel[1]), indexing="ij"
    )
    shift = kx * s.dilations[1]
    offsets = ((c * rows + ky * s.dilations[0]) * phases + shift % phases) * columns + shift // phases
    return np.ascontiguousarray(offsets.reshape(-1), dtype=np.int64)


@numba.njit(cache=True)
def fill_frame(
    x: np.ndarray, pad_top: int, pad_left: int, first: int, last: int, y0: int, y1: int, frame: np.ndarray
) -> None:
    """Rows first..last-1 of frame (N*C*rows, phases, columns) from x, those of them whose row in
    their plane is y0..y1-1: row (plane, y) holds input row y - pad_top of plane (image * C +
    channel), its columns split by phase, zeros outside the image.

    Why this shape (each measured on SimpleCNN's 3x3/2 stem, where the copy cost as much as the
    multiplications): the columns that every phase holds are copied by one loop over the input row,
    with stride 2 a de-interleave that LLVM vectorises only through views of the row (flat indices
    left it scalar, about one value per cycle); the few edge columns go through a table built once,
    not through divisions and short loops per row; short runs keep flat, unsigned indices, as a
    view per run costs more than its copy there (SimpleCNN's 15x15 layer: 1088 runs of 17 floats)."""
    height, width = x.shape[2], x.shape[3]
    rows, phases, columns = frame.shape[0] // (x.shape[0] * x.shape[1]), frame.shape[1], frame.shape[2]
    source = x.reshape(-1)
    target = frame.reshape(-1)
    zero = np.float32(0.0)
    # columns j that hold an input column (j*phases + q - pad_left in [0, width)) in every phase q
    common_lo = min((pad_left + phases - 1) // phases, columns)
    common_hi = max(min(columns, (width + pad_left) // phases), common_lo)
    count = common_hi - common_lo
    # the other columns: (offset in the row's phases x columns, padded column or -1 for a zero)
    edges = np.empty((phases * (columns - count), 2), np.int64)
    e = 0
    for q in range(phases):
        for j in range(columns):
            if j < common_lo or j >= common_hi:
                padded = j * phases + q
                edges[e, 0] = q * columns + j
                edges[e, 1] = padded if 0 <= padded - pad_left < width else -1
                e += 1
    plane, y = first // rows, first % rows
    for r in range(first, last):
        iy = y - pad_top
        line = (plane * height + iy) * width - pad_left  # flat index of padded column 0
        wanted = y0 <= y < y1
        y += 1
        if y == rows:
            plane, y = plane + 1, 0
        if not wanted:
            continue
        row = r * phases * columns
        if iy < 0 or iy >= height:
            for j in range(phases * columns):
                target[np.uint64(row + j)] = zero
            continue
        for e in range(edges.shape[0]):
            padded = edges[e, 1]
            target[np.uint64(row + edges[e, 0])] = source[np.uint64(line + padded)] if padded >= 0 else zero
        into, at = row + common_lo, line + common_lo * phases
        if phases == 1:
            for j in range(np.uint64(count)):
                target[np.uint64(into) + j] = source[np.uint64(at) + j]
        elif phases == 2 and count >= 16:
            even, odd, pairs = (
                target[into : into + count],
                target[into + columns :],
                source[at : at + 2 * count],
            )
            for j in range(count):
                even[j] = pairs[2 * j]
                odd[j] = pairs[2 * j + 1]
        else:
            step = np.uint64(phases)
            for q in range(phases):
                into_q, at_q = np.uint64(into + q * columns), np.uint64(at + q)
                for j in range(np.uint64(count)):
                    target[into_q + j] = source[at_q + j * step]


@numba.njit(cache=True)
def _direct_tasks(
    worker: int,
    workers: int,
    frame: np.ndarray,  # (N*C*rows, phases, columns) from fill_frame
    packed: np.ndarray,  # (G, packed size): pack_weights per group
    depth: int,  # Cg * KH * KW
    offsets: np.ndarray,  # (depth,) tap_offsets
    frame_rows: int,  # rows of one channel's frame
    bias: np.ndarray,  # (M,): zeros where the layer has none
    has_bias: bool,
    stride_h: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    row_step: int,  # output channels per task (a multiple of ROWS)
    band: int,  # output rows per task
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    """Tasks worker, worker + workers, ... of (image, group, band of output rows, channels)."""
    batch, out_channels, out_h, out_w = out.shape
    groups = packed.shape[0]
    out_per_group = out_channels // groups
    rows, phases, columns = frame_rows, frame.shape[1], frame.shape[2]
    in_per_group = frame.shape[0] // rows // batch // groups
    plane = rows * phases * columns
    pixels = out_h * out_w
    row_blocks = (out_per_group + ROWS - 1) // ROWS
    channel_tiles = (out_per_group + row_step - 1) // row_step
    bands = (out_h + band - 1) // band
    tasks = batch * groups * bands * channel_tiles
    frame_flat = frame.reshape(-1)
    c_flat = out.reshape(-1)
    out_rows = out.reshape(batch, out_channels, pixels)
    # one pass over the depth and an activation that is none, ReLU or a clip: the micro-kernel's
    # stores add the bias and apply it, and no epilogue pass reads the output back (SqueezeNet's
    # conv1: 13% of the layer)
    finished = depth <= DEPTH_BLOCK and (kind == 0 or kind == 1 or kind == 3)
    floor, ceiling = np.float32(low), np.float32(high)
    for task in range(worker, tasks, workers):
        b_tile = task % bands
        rest = task // bands
        m_tile = rest % channel_tiles
        rest //= channel_tiles
        g = rest % groups
        n = rest // groups
        oy0 = b_tile * band
        oy1 = min(oy0 + band, out_h)
        m0 = m_tile * row_step
        m1 = min(m0 + row_step, out_per_group)
        weights = packed[g]
        first_channel = g * out_per_group
        image_base = ((n * groups + g) * in_per_group) * plane
        for k0 in range(0, depth, DEPTH_BLOCK):
            steps = min(DEPTH_BLOCK, depth - k0)
            taps = offsets[k0 : k0 + steps]
            accumulate = k0 > 0
            for mc0 in range(m0, m1, ROW_BLOCK):
                mc1 = min(mc0 + ROW_BLOCK, m1)
                for oy in range(oy0, oy1):
                    row_base = image_base + oy * stride_h * phases * columns
                    for ox0 in range(0, out_w, COLUMNS):
                        width = min(COLUMNS, out_w - ox0)
                        for r0 in range(mc0, mc1, ROWS):
                            a_at = k0 * row_blocks * ROWS + (r0 // ROWS) * steps * ROWS
                            c_at = ((n * out_channels + first_channel + r0) * out_h + oy) * out_w + ox0
                            count = min(ROWS, mc1 - r0)
                            if finished:
                                micro_kernel_rows_finished(
                                    steps, weights, a_at, frame_flat, row_base + ox0, taps, c_flat, c_at,
                                    pixels, accumulate, count, width, bias, first_channel + r0, kind, floor, ceiling,
                                )  # fmt: skip
                            else:
                                micro_kernel_rows(
                                    steps, weights, a_at, frame_flat, row_base + ox0, taps, c_flat, c_at,
                                    pixels, accumulate, count, width,
                                )  # fmt: skip
        if not finished and (has_bias or kind != 0):
            rows_epilogue(
                out_rows[n],
                first_channel + m0,
                first_channel + m1,
                oy0 * out_w,
                oy1 * out_w,
                bias,
                has_bias,
                kind,
                alpha,
                low,
                high,
            )


def _direct_conv_2d(
    x: np.ndarray,
    pad_top: int,
    pad_left: int,
    frame: np.ndarray,
    packed: np.ndarray,
    depth: int,
    offsets: np.ndarray,
    frame_rows: int,
    bias: np.ndarray,
    has_bias: bool,
    stride_h: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    row_step: int,
    band: int,
    workers: int,
    out: np.ndarray,
) -> None:
    """The frame filled by all workers, then every task (two parallel regions per layer)."""
    rows = frame.shape[0]
    for worker in numba.prange(workers):
        first, last = worker * rows // workers, (worker + 1) * rows // workers
        fill_frame(x, pad_top, pad_left, first, last, 0, frame_rows, frame)
    for worker in numba.prange(workers):
        _direct_tasks(
            worker,
            workers,
            frame,
            packed,
            depth,
            offsets,
            frame_rows,
            bias,
            has_bias,
            stride_h,
            kind,
            alpha,
            low,
            high,
            row_step,
            band,
            out,
        )


direct_conv_2d, direct_conv_2d_serial = parallel_and_serial(_direct_conv_2d, "direct_conv_2d")


def direct_tiles(products: int, rows: int, out_h: int, out_w: int, threads: int) -> tuple[int, int, int]:
    """(output channels per task, output rows per band, workers): bands of about 256 output pixels,
    a multiple of the threads where that costs little; channels split where bands are too few."""
    band = max(1, min(out_h, math.ceil(256 / out_w)))
    bands = math.ceil(out_h / band)
    total = products * bands
    if threads > 1 and total > threads and total % threads:
        balanced = math.ceil(-(-total // threads) * threads / products)
        if balanced <= out_h:
            band = math.ceil(out_h / balanced)
            bands = math.ceil(out_h / band)
    splits = 1
    if threads > 1 and products * bands < threads:
        splits = min(math.ceil(threads / (products * bands)), math.ceil(rows / ROWS))
    row_step = -(-math.ceil(rows / splits) // ROWS) * ROWS
    tasks = products * bands * math.ceil(rows / row_step)
    return row_step, band, max(1, min(threads, tasks))


class DirectConv(ConvKernel):
    """A layer's packed weights, tap offsets and frame geometry; runs the tasks on numba's threads."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        s = self.setup
        w = values[1]
        assert w is not None
        groups = s.group
        per_group = w.reshape(groups, s.out_channels // groups, -1).astype(np.float32, copy=False)
        self.packed = np.ascontiguousarray(np.stack([pack_weights(per_group[g]) for g in range(groups)]))
        self.depth = per_group.shape[2]
        self.offsets = tap_offsets(s)
        rows, phases, columns = frame_shape(s)
        self.frame = (s.batch * s.in_channels * rows, phases, columns)
        self.small = small_conv(s.batch * s.out_channels * self.pixels * self.depth)

    def plan_tiles(self, threads: int) -> tuple[int, int, int]:
        s = self.setup
        return direct_tiles(s.batch * s.group, s.out_channels // s.group, s.out[0], s.out[1], threads)

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        s = self.setup
        row_step, band, workers = self.tiles(1 if self.small else current_threads())
        frame = scratch(math.prod(self.frame)).reshape(self.frame)
        kernel = direct_conv_2d_serial if workers == 1 else direct_conv_2d
        kernel(
            np.ascontiguousarray(x),
            s.pads[0],
            s.pads[1],
            frame,
            self.packed,
            self.depth,
            self.offsets,
            self.frame[0] // (s.batch * s.in_channels),
            self.bias,
            self.has_bias,
            s.strides[0],
            *self.activation,
            row_step,
            band,
            workers,
            out,
        )
