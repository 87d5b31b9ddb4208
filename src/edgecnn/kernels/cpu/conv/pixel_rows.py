"""Convolution on small maps as one GEMM with the output pixels as its rows:
C (pixels x M) = A (pixels x K) @ W (K x M), each block stored transposed into (N, M, H, W) with
bias, residual and activation.

Why: the packed GEMM (conv/packed.py) and the in-place 1x1 kernel (conv/pointwise.py) put pixels in
the micro-kernel's COLUMNS-wide runs and output channels in its rows: a 7x7 map's 49 pixels fill 49
of 64 lanes, a 14x14 map's 196 fill 196 of 224. Here the output channels are the columns (most
layers have a multiple of COLUMNS) and the pixels the rows, so the ROWS-row blocks waste at most a
few rows. Each thread takes whole COLUMNS-channel panels of the packed weights and reads each panel
end to end once per ROWS-row block, from memory the first time (ResNet-50's last two stages hold 1
to 9 MB of weights per layer, which come from DRAM on every run) and from L2 after; A, a few hundred
KB to 2 MB, stays in L2.

Steps of a run: the input copied, zero-padded, to channels-last (rows of the frame spread over the
threads); A unfolded from it, one row per output pixel, each filter tap's C-vector one contiguous
copy; then each thread's panels multiplied. The micro-kernel stores each block of ROWS pixels x
COLUMNS channels straight into the NCHW output, one ROWS-float vector per channel, finished: no C
block in between and no pass to transpose it (that pass was 8-13% of a K=256 layer), and an
image's last block computes only the rows it stores (a 7x7 map's 49 pixels took 7 blocks of 8 when
the last one was moved back whole; now 6 and a 2-row one). K is ordered
(tap row, tap column, channel), so the weights are packed in that order once, at plan time. A 1x1
stride-1 unpadded layer skips both copies: its NCHW input already is A, column-major, which the
micro-kernel reads in place (one parallel region instead of three); a strided 1x1 unpadded layer
gathers its pixels into an NCHW scratch, read the same way (two regions). While a panel's blocks
run, they ask for the thread's next panel of weights, so that DRAM works during the whole panel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv import steps as conv
from edgecnn.kernels.cpu.conv.setup import ConvSetup, ResidualIntoKernel, conv_setup
from edgecnn.kernels.cpu.conv.tiled_gemm import rows_epilogue
from edgecnn.kernels.cpu.conv.winograd_transforms import pad_channels_last
from edgecnn.kernels.cpu.gemm.microkernel import (
    COLUMNS,
    ROWS,
    micro_kernel_column_a_transposed,
    micro_kernel_strided_a_transposed,
)
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system import blas
from edgecnn.kernels.cpu.system.common import scratch
from edgecnn.kernels.cpu.system.threads import call, current_threads, small_conv
from edgecnn.kernels.cpu.system.twins import parallel_and_serial
from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning


def rows_fit(setup: ConvSetup) -> bool:
    """Whether the heuristic gives the layer this kernel (CpuTuning): at most ``max_rows`` output
    pixels (``max_in_place_rows`` for 1x1 stride-1 layers at batch 1, read in place; strided ones
    keep ``max_rows``), an unfolded input of at most ``max_a_bytes`` (it must stay in L2), at least
    ``rows_min_depth`` multiply-adds per output, and only where the micro-kernel takes the BLAS
    tiles' layers too (conv.micro_kernel_over_blas: measured with AVX-512 only) or BLAS cannot be
    called."""
    tuning = active_cpu_tuning()
    rows = setup.batch * setup.out[0] * setup.out[1]
    depth = setup.in_channels * setup.kernel[0] * setup.kernel[1]
    in_place = setup.pointwise and setup.batch == 1 and rows <= tuning.max_in_place_rows
    fits = (
        (rows <= tuning.max_rows or in_place)
        and 4 * rows * depth <= tuning.max_a_bytes
        and depth >= tuning.rows_min_depth
    )
    return fits and (conv.micro_kernel_over_blas() or not blas.AVAILABLE)


def subsampled(setup: ConvSetup) -> bool:
    """A 1x1 unpadded layer with a stride: its A is the input's pixels at the stride."""
    return setup.kernel == (1, 1) and not any(setup.pads) and setup.strides != (1, 1)


def can_run(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    """Any compiled, ungrouped convolution (for `edgecnn tune`)."""
    if not conv.can_pack(node, types, values):
        return False
    setup = conv_setup(node, types)
    return setup is not None and setup.group == 1


def when_rows(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    setup = conv_setup(node, types)
    return can_run(node, types, values) and setup is not None and rows_fit(setup)


def pack_panels(weights: np.ndarray, taps_first: bool = True) -> np.ndarray:
    """(M, C, kh, kw) filters -> flat (panels, K, COLUMNS): K ordered (tap row, tap column, channel)
    for a channels-last input, or (channel, tap row, tap column) for an NCHW one (``taps_first``
    False); output channel 32 p + j in column j of panel p, the last panel padded with zero columns."""
    out_channels = weights.shape[0]
    depth = int(np.prod(weights.shape[1:]))
    panels = -(-out_channels // COLUMNS)
    matrix = np.zeros((depth, panels * COLUMNS), dtype=np.float32)
    order = (2, 3, 1, 0) if taps_first else (1, 2, 3, 0)
    matrix[:, :out_channels] = weights.transpose(order).reshape(depth, out_channels)
    return np.ascontiguousarray(matrix.reshape(depth, panels, COLUMNS).transpose(1, 0, 2)).reshape(-1)


def _rows_conv_2d(
    x: np.ndarray,  # (N, C, H, W)
    packed: np.ndarray,  # pack_panels of the filters
    bias: np.ndarray,  # (M,)
    kind: int,
    alpha: float,
    low: float,
    high: float,
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    dilation_h: int,
    dilation_w: int,
    pad_top: int,
    pad_left: int,
    xt: np.ndarray,  # (N * Hp, Wp, C) scratch: the padded channels-last input
    a: np.ndarray,  # flat scratch: A's rows, then ROWS rows more (read by a cut block, never stored)
    unfold: bool,  # False: A is read column-major, from x itself (1x1 stride-1 unpadded) or ``a``
    subsample: bool,  # ``a`` gets x's pixels at the strides, (N, C, OH, OW) (1x1 unpadded, strided)
    residual: np.ndarray,  # (N, M, OH, OW) added before the activation, or empty: none
    workers: int,
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    batch, channels = x.shape[0], x.shape[1]
    out_channels, out_h, out_w = out.shape[1], out.shape[2], out.shape[3]
    pixels = out_h * out_w
    rows = batch * pixels
    depth = kernel_h * kernel_w * channels
    frame_h, frame_w = xt.shape[0] // batch, xt.shape[1]
    frame_rows = batch * frame_h
    x_flat = x.reshape(-1)
    if subsample:
        planes, height, width = batch * channels, x.shape[2], x.shape[3]
        for worker in numba.prange(workers):
            for plane in range(worker * planes // workers, (worker + 1) * planes // workers):
                for oy in range(out_h):
                    line = (plane * height + oy * stride_h) * width
                    target = (plane * out_h + oy) * out_w
                    for ox in range(out_w):
                        a[target + ox] = x_flat[line + ox * stride_w]
    if unfold:  # a prange of no iterations still wakes the workers (about 10 us after a pause)
        for worker in numba.prange(workers):
            first, last = worker * frame_rows // workers, (worker + 1) * frame_rows // workers
            pad_channels_last(x, pad_top, pad_left, first, last, xt)
        flat = xt.reshape(-1)
        for worker in numba.prange(workers):
            for row in range(worker * rows // workers, (worker + 1) * rows // workers):
                n, p = divmod(row, pixels)
                oy, ox = divmod(p, out_w)
                for ky in range(kernel_h):
                    line = (n * frame_h + oy * stride_h + ky * dilation_h) * frame_w + ox * stride_w
                    for kx in range(kernel_w):
                        source = (line + kx * dilation_w) * channels
                        target = row * depth + (ky * kernel_w + kx) * channels
                        a[target : target + channels] = flat[source : source + channels]
    panels = packed.size // (depth * COLUMNS)
    has_residual = residual.size > 0
    z = residual.reshape(-1) if has_residual else out.reshape(-1)  # never read without a residual
    result = out.reshape(-1)
    columns = a if subsample else x_flat  # A, column-major, where not unfolded
    fused = kind == 0 or kind == 1 or kind == 3  # the micro-kernel's stores apply these
    store_kind = kind if fused else 0
    out_rows = out.reshape(batch, out_channels, pixels)
    panel_size = depth * COLUMNS
    blocks = batch * ((pixels + ROWS - 1) // ROWS)
    share = (COLUMNS + blocks - 1) // blocks  # of the next panel's floats per depth step and block
    for worker in numba.prange(workers):
        end = (worker + 1) * panels // workers
        for panel in range(worker * panels // workers, end):
            first = panel * COLUMNS
            block = 0
            for n in range(batch):
                # each block goes straight to the panel's channels of the NCHW output, finished
                target = (n * out_channels + first) * pixels
                for q0 in range(0, pixels, ROWS):
                    count = min(ROWS, pixels - q0)
                    # the part of the next panel this block asks for (prefetches never fault), so
                    # that DRAM brings it while this panel's blocks run
                    ahead, ahead_step = panel * panel_size, 0
                    if panel + 1 < end and block * share < COLUMNS:
                        ahead, ahead_step = (panel + 1) * panel_size + block * share * depth, share
                    block += 1
                    if not unfold:
                        micro_kernel_column_a_transposed(
                            depth, columns, n * depth * pixels + q0, pixels, packed, panel * depth * COLUMNS,
                            COLUMNS, result, target + q0, pixels, False, count, out_channels - first, bias, first,
                            store_kind, np.float32(low), np.float32(high), z, has_residual, ahead, ahead_step,
                        )  # fmt: skip
                    else:
                        micro_kernel_strided_a_transposed(
                            depth, a, (n * pixels + q0) * depth, depth, packed, panel * depth * COLUMNS,
                            COLUMNS, result, target + q0, pixels, False, count, out_channels - first, bias, first,
                            store_kind, np.float32(low), np.float32(high), z, has_residual, ahead, ahead_step,
                        )  # fmt: skip
                if not fused:
                    last = min(first + COLUMNS, out_channels)
                    rows_epilogue(out_rows[n], first, last, 0, pixels, bias, False, kind, alpha, low, high)


rows_conv_2d, rows_conv_2d_serial = parallel_and_serial(_rows_conv_2d, "rows_conv_2d")


class RowsConv(ResidualIntoKernel):
    """One layer's packed weights and frame; runs the three steps on numba's threads."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        s = self.setup
        w = values[1]
        assert w is not None and s.group == 1
        self.packed = pack_panels(np.asarray(w, dtype=np.float32))
        self.panels = math.ceil(s.out_channels / COLUMNS)
        self.depth = s.in_channels * s.kernel[0] * s.kernel[1]
        self.rows = s.batch * self.pixels
        top, left, bottom, right = s.pads
        # the frame holds every window the strides and dilations reach, zeros outside the input
        span_h = (s.out[0] - 1) * s.strides[0] + (s.kernel[0] - 1) * s.dilations[0] + 1
        span_w = (s.out[1] - 1) * s.strides[1] + (s.kernel[1] - 1) * s.dilations[1] + 1
        self.frame = (max(top + s.height + bottom, span_h), max(left + s.width + right, span_w))
        self.subsample = subsampled(s)
        self.unfold = not (s.pointwise and self.frame == (s.height, s.width)) and not self.subsample
        self.small = small_conv(s.batch * s.out_channels * self.pixels * self.depth)
        # A read in place: a 1x1 bottleneck expansion, whose z (the block's input) the block's first
        # layer has just read on every core; stores over z would first fetch each line back from
        # another core, so its residual sum goes to a buffer of its own (conv/residual.py)
        self.overwrites_residual = self.unfold or self.subsample

    def _run(
        self,
        out: np.ndarray,
        x: np.ndarray,
        residual: np.ndarray,
        activation: tuple[int, float, float, float],
    ) -> None:
        s = self.setup
        workers = 1 if self.small else max(1, min(current_threads(), self.panels))
        if self.unfold:
            frame_size = s.batch * self.frame[0] * self.frame[1] * s.in_channels
            a_size = (self.rows + ROWS) * self.depth
            buffer = scratch(frame_size + ROWS * s.in_channels + a_size)
            xt = buffer[:frame_size].reshape(s.batch * self.frame[0], self.frame[1], s.in_channels)
            a = buffer[frame_size + ROWS * s.in_channels :]
        else:  # no frame: A read from x in place, or gathered from it (subsample)
            a = scratch(self.rows * self.depth if self.subsample else 0)
            xt = a[:0].reshape(0, 0, s.in_channels)
        call(
            rows_conv_2d,
            workers == 1,
            np.ascontiguousarray(x), self.packed, self.bias, *activation, *s.kernel, *s.strides,
            *s.dilations, s.pads[0], s.pads[1], xt, a, self.unfold, self.subsample, residual, workers, out,
        )  # fmt: skip


register("pixel_rows", RowsConv, when=when_rows, applies=can_run)
