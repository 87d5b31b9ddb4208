"""Convolution on the packed-weight GEMM (gemm/packed_gemm.py): the weights are packed for the
micro-kernel once, when the plan is built, and each tile's im2col columns (or, for a 1x1 layer, its
input rows) are packed into 16-column panels a depth block at a time, straight from the image.

Why: the BLAS path (conv/tiled_gemm.py) hands each tile to sgemm, which packs the whole weight matrix
again on every call; on small maps (ResNet's 7x7 and 14x14 layers: 49 and 196 output pixels per
weight) that repacking costs as much as the multiplications, and BLAS also copies the columns that
im2col has just written. Here a tile's columns go from the image to the micro-kernel's panels:
through the layer's tap table straight into them where it has one (gather_panels), else through
one cache-resident block of rows.

Tiles: (image, group, block of at most COLUMN_BLOCK output pixels, rows of output channels); the
rows are split (in multiples of the micro-kernel's ROWS) only when there are fewer pixel blocks
than threads. Each tile ends with the bias + activation epilogue while it is in cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.im2col import NO_TAP_TABLE, im2col_rows, tap_table
from edgecnn.kernels.cpu.conv.setup import ConvKernel, ConvSetup
from edgecnn.kernels.cpu.conv.tiled_gemm import rows_epilogue
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS, ROWS
from edgecnn.kernels.cpu.gemm.packed_gemm import (
    COLUMN_BLOCK,
    DEPTH_BLOCK,
    gather_panels,
    gemm_panels,
    pack_panels,
    pack_weights,
)
from edgecnn.kernels.cpu.system.common import worker_scratch
from edgecnn.kernels.cpu.system.threads import current_threads, small_conv
from edgecnn.kernels.cpu.system.twins import parallel_and_serial


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def packed_tiles(products: int, rows: int, pixels: int, threads: int) -> tuple[int, int, int]:
    """(output channels per tile, output pixels per tile, workers) for ``products`` (images x
    groups) of ``rows`` output channels and ``pixels`` output pixels on ``threads`` threads."""
    blocks = math.ceil(pixels / COLUMN_BLOCK)
    total = products * blocks
    if threads > 1 and total > threads and total % threads:  # equal shares for static scheduling
        balanced = math.ceil(_round_up(total, threads) / products)
        if pixels / balanced >= COLUMNS:
            blocks = balanced
    pixel_step = min(pixels, _round_up(math.ceil(pixels / blocks), COLUMNS))
    blocks = math.ceil(pixels / pixel_step)
    splits = 1
    if threads > 1 and products * blocks < threads:
        splits = min(math.ceil(threads / (products * blocks)), math.ceil(rows / ROWS))
    row_step = _round_up(math.ceil(rows / splits), ROWS)
    tasks = products * blocks * math.ceil(rows / row_step)
    return row_step, pixel_step, max(1, min(threads, tasks))


@numba.njit(cache=True)
def _packed_tasks(
    worker: int,
    workers: int,
    x: np.ndarray,  # (N, C, H, W)
    packed: np.ndarray,  # (G, Kg * ceil(Mg / ROWS) * ROWS): pack_weights per group
    depth: int,  # Kg
    bias: np.ndarray,
    has_bias: bool,
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    pointwise: bool,  # 1x1, stride 1, no padding: the input rows are the columns
    taps: np.ndarray,  # im2col.tap_table, or NO_TAP_TABLE: unfold segment by segment
    kind: int,
    alpha: float,
    low: float,
    high: float,
    row_step: int,  # output channels per tile (a multiple of ROWS)
    pixel_step: int,  # output pixels per tile
    buffers: np.ndarray,  # (workers, scratch floats) per worker: panels, rows block
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    """Tasks worker, worker + workers, ... of the layer's tiles."""
    batch, channels, height, width = x.shape
    groups = packed.shape[0]
    in_per_group = channels // groups
    out_channels = out.shape[1]
    out_per_group = out_channels // groups
    out_w = out.shape[3]
    pixels = out.shape[2] * out_w
    plane = height * width
    out_rows = out.reshape(batch, out_channels, pixels)
    x_flat = x.reshape(-1)
    c_flat = out.reshape(-1)
    blocks = (out_per_group + ROWS - 1) // ROWS
    row_tiles = (out_per_group + row_step - 1) // row_step
    pixel_tiles = (pixels + pixel_step - 1) // pixel_step
    tasks = batch * groups * row_tiles * pixel_tiles
    buffer = buffers[worker]
    panels = buffer[: DEPTH_BLOCK * _panel_width(pixel_step)]
    rows_block = buffer[DEPTH_BLOCK * _panel_width(pixel_step) :]
    for task in range(worker, tasks, workers):
        p_tile = task % pixel_tiles
        rest = task // pixel_tiles
        m_tile = rest % row_tiles
        rest //= row_tiles
        g = rest % groups
        n = rest // groups
        p0 = p_tile * pixel_step
        p1 = min(p0 + pixel_step, pixels)
        span = p1 - p0
        m0 = m_tile * row_step
        m1 = min(m0 + row_step, out_per_group)
        weights = packed[g]
        image = x[n, g * in_per_group : (g + 1) * in_per_group]
        first_channel = g * out_per_group
        c_off = (n * out_channels + first_channel) * pixels + p0
        for k0 in range(0, depth, DEPTH_BLOCK):
            steps = min(DEPTH_BLOCK, depth - k0)
            if pointwise:
                b_off = (n * channels + g * in_per_group + k0) * plane + p0
                pack_panels(x_flat, b_off, plane, steps, span, panels)
            elif taps.shape[0] > 0:
                gather_panels(image, taps, k0, k0 + steps, p0, p1, panels)
            else:
                rows = rows_block[: steps * span].reshape(steps, span)
                im2col_rows(
                    image, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, dilation_h,
                    dilation_w, out_w, k0, k0 + steps, p0, p1, rows,
                )  # fmt: skip
                pack_panels(rows_block, 0, span, steps, span, panels)
            gemm_panels(weights, blocks, k0, steps, m0, m1, panels, span, c_flat, c_off, pixels, k0 > 0)
        if has_bias or kind != 0:
            rows_epilogue(
                out_rows[n],
                first_channel + m0,
                first_channel + m1,
                p0,
                p1,
                bias,
                has_bias,
                kind,
                alpha,
                low,
                high,
            )


@numba.njit(inline="always", cache=True)
def _panel_width(pixel_step: int) -> int:
    return (pixel_step + COLUMNS - 1) // COLUMNS * COLUMNS


def scratch_floats(pixel_step: int) -> int:
    """Floats of scratch one worker needs: the panels and the rows block."""
    return DEPTH_BLOCK * (_round_up(pixel_step, COLUMNS) + pixel_step)


def _packed_conv_2d(
    x: np.ndarray,
    packed: np.ndarray,
    depth: int,
    bias: np.ndarray,
    has_bias: bool,
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    pointwise: bool,
    taps: np.ndarray,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    row_step: int,
    pixel_step: int,
    buffers: np.ndarray,
    out: np.ndarray,
) -> None:
    """All tiles, ``buffers.shape[0]`` workers side by side (one parallel region per layer)."""
    workers = buffers.shape[0]
    for worker in numba.prange(workers):
        _packed_tasks(
            worker,
            workers,
            x,
            packed,
            depth,
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
            taps,
            kind,
            alpha,
            low,
            high,
            row_step,
            pixel_step,
            buffers,
            out,
        )


packed_conv_2d, packed_conv_2d_serial = parallel_and_serial(_packed_conv_2d, "packed_conv_2d")


def pack_conv_weights(weights: np.ndarray, setup: ConvSetup) -> np.ndarray:
    """(M, Cg, KH, KW) -> (G, packed size): each group's (Mg, Kg) matrix packed."""
    groups = setup.group
    per_group = weights.reshape(groups, setup.out_channels // groups, -1).astype(np.float32, copy=False)
    return np.ascontiguousarray(np.stack([pack_weights(per_group[g]) for g in range(groups)]))


class PackedConv(ConvKernel):
    """A layer's packed weights and tiling; runs the tiles on numba's threads."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        s = self.setup
        w = values[1]
        assert w is not None
        self.packed = pack_conv_weights(w, s)
        self.depth = s.in_channels // s.group * s.kernel[0] * s.kernel[1]
        self.small = small_conv(s.batch * s.out_channels * self.pixels * self.depth)
        self.taps = self.packed_taps()

    def packed_taps(self) -> np.ndarray:
        """The tap table wherever the unfold does not copy whole shifted rows (unit strides, output
        as wide as the input): with gather_panels a gathered value is copied once, where the segment
        path copies it into a block of rows and then into the panels."""
        s = self.setup
        if s.pointwise or (s.strides == (1, 1) and s.out[1] == s.width):
            return NO_TAP_TABLE
        return tap_table(s.height, s.width, s.kernel, s.strides, (s.pads[0], s.pads[1]), s.dilations, s.out)

    def plan_tiles(self, threads: int) -> tuple[int, int, int]:
        s = self.setup
        return packed_tiles(s.batch * s.group, s.out_channels // s.group, self.pixels, threads)

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        s = self.setup
        row_step, pixel_step, workers = self.tiles(1 if self.small else current_threads())
        per_worker = scratch_floats(pixel_step)
        buffers = worker_scratch(workers, per_worker)
        kernel = packed_conv_2d_serial if workers == 1 else packed_conv_2d
        kernel(
            np.ascontiguousarray(x),
            self.packed,
            self.depth,
            self.bias,
            self.has_bias,
            *s.window,
            s.pointwise,
            self.taps,
            *self.activation,
            row_step,
            pixel_step,
            buffers,
            out,
        )
