"""Winograd convolution F(2x2, 3x3) and F(4x4, 3x3) for Conv and FusedConv on the CPU.

Applies to 3x3 filters with unit strides and dilations, one group, any padding and float32
constant weights. F(4x4) does 4x fewer multiplications than direct convolution and F(2x2) 2.25x fewer, at the price of the transforms and
of rounding error that grows with the tile.

Filters are transformed once, when the plan is built; each run moves the input to channels-last,
transforms chunks of input tiles, multiplies them by one GEMM per transform point and transforms
the products back with the fused bias and activation (winograd_transforms.py). Whether a layer
gets Winograd, and which tile, is ``preferred_tile``'s rule unless `edgecnn tune` measured the layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.setup import ConvKernel, ConvSetup, conv_setup
from edgecnn.kernels.cpu.conv.winograd_transforms import transform_filters, winograd_conv_2d
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import constant_float32, scratch, single_output, worker_scratch
from edgecnn.kernels.cpu.system.threads import call
from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning

CHUNK_BYTES = 1 << 23
"""Target size of one chunk's transformed tiles and products together. Each chunk streams every
transformed filter through a GEMM (BLAS packs it again per call), so wide chunks pay once the
transforms are cheap."""

MIN_TILES, MAX_TILES = 16, 512
"""Bounds on the tiles per chunk: narrower GEMMs waste the BLAS micro-kernel, wider ones the cache."""

MIN_CHANNELS = 16
"""Fewest output channels per task when a small map's channels are split among threads; shares are
then rounded up to whole 16-channel filter panels (microkernel.COLUMNS)."""

MIN_SPLIT_TILES = 64
"""Fewest tiles per thread when one chunk's tiles are split among threads, for F(2x2); below it
the threads split the output channels instead, each transforming all the tiles and streaming half
the transformed filters through GEMMs twice as wide."""

MIN_SPLIT_TILES_F43 = 24
"""The same for F(4x4), whose 6x6 tiles carry 36 transform points instead of 16, so transforming
every tile on both threads costs more."""

POINT_PAD = 16
"""Floats (one cache line) between the scratch blocks of two transform points. The transforms
read or write all T points of a tile at once; blocks a multiple of 4 KiB apart would all map to
the same L1 cache set (measured: the transforms ran 2-4x slower)."""


def winograd_setup(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> ConvSetup | None:
    """The layer's geometry if Winograd can run it (3x3, stride 1, dilation 1, one group), else None."""
    if not single_output(node):
        return None
    if not (constant_float32(node, values, 1) and constant_float32(node, values, 2, optional=True)):
        return None
    setup = conv_setup(node, types)
    if setup is None or setup.group != 1 or setup.kernel != (3, 3):
        return None
    if setup.strides != (1, 1) or setup.dilations != (1, 1):
        return None
    return setup


def preferred_tile(setup: ConvSetup) -> int:
    """The output tile (4 or 2) where Winograd beats im2col + GEMM, or 0 where it does not
    (thresholds in CpuTuning).

    The input transform costs per input channel and the output transform per output channel while
    the saved multiplications scale with their product, so C*M / (C+M) must reach
    ``min_channel_ratio``; with fewer than ``min_in_channels`` input channels the GEMMs are too
    shallow (K = C) to pay, except F(4x4) from ``shallow_in_channels`` on maps at most
    ``shallow_max_width`` wide. 4x4 tiles from ``min_f43_tiles`` tiles, or from
    ``min_small_f43_tiles`` (one 13x13 or 14x14 map) where the transformed filters take at most
    ``max_small_f43_bytes``. Else 2x2 tiles from C*M/(C+M) = ``min_f23_ratio`` and
    ``min_f23_tiles`` tiles, or with fewer tiles from ``wide_f23_ratio`` (infinite: never; such a
    map's transformed filters come from DRAM on every run for too few tiles).
    """
    tuning = active_cpu_tuning()
    c, m = setup.in_channels, setup.out_channels
    tiles = setup.batch * math.ceil(setup.out[0] / 4) * math.ceil(setup.out[1] / 4)
    # 16-35 tiles (a 13x13 or 14x14 map) only where the 6x6 transformed filters are small
    small_filters = 36 * c * m * 4 <= tuning.max_small_f43_bytes
    f43_tiles = tiles >= tuning.min_f43_tiles or (tiles >= tuning.min_small_f43_tiles and small_filters)
    wide_enough = c * m >= tuning.min_channel_ratio * (c + m)
    if c < tuning.min_in_channels:
        narrow_map = max(setup.out) <= tuning.shallow_max_width
        shallow = c >= tuning.shallow_in_channels and narrow_map and f43_tiles
        return 4 if shallow and wide_enough else 0
    if not wide_enough:
        return 0
    if f43_tiles:
        return 4
    f23_tiles = setup.batch * math.ceil(setup.out[0] / 2) * math.ceil(setup.out[1] / 2)
    if c * m >= tuning.min_f23_ratio * (c + m) and f23_tiles >= tuning.min_f23_tiles:
        return 2
    return 2 if c * m >= tuning.wide_f23_ratio * (c + m) else 0


def when_winograd_f43(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    setup = winograd_setup(node, types, values)
    return setup is not None and preferred_tile(setup) == 4


def when_winograd_f23(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    setup = winograd_setup(node, types, values)
    return setup is not None and preferred_tile(setup) == 2


def point_row(rows: int, step: int) -> int:
    """Floats per transform point in a worker's scratch: the point's (rows x step) block followed by
    POINT_PAD unused floats, so that the blocks of consecutive transform points do not start 4 KiB
    apart."""
    return rows * step + POINT_PAD


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def chunking(points: int, in_channels: int, out_channels: int, tiles: int, threads: int) -> tuple[int, int]:
    """(tiles per chunk, output channels per task): chunks of about CHUNK_BYTES of scratch, a
    multiple of ``threads`` of them where there are enough tiles, one chunk split among the threads
    where each gets MIN_SPLIT_TILES (MIN_SPLIT_TILES_F43 for F(4x4)), output channels split otherwise."""
    step = CHUNK_BYTES // (4 * points * (in_channels + out_channels))
    step = min(max(MIN_TILES, min(MAX_TILES, step)), tiles)
    chunks = math.ceil(tiles / step)
    if threads == 1:
        return step, out_channels
    if chunks >= threads:
        return math.ceil(tiles / round_up(chunks, threads)), out_channels
    if math.ceil(tiles / threads) >= (MIN_SPLIT_TILES_F43 if points == 36 else MIN_SPLIT_TILES):
        return math.ceil(tiles / threads), out_channels
    blocks = math.ceil(threads / chunks)
    return step, round_up(max(MIN_CHANNELS, math.ceil(out_channels / blocks)), COLUMNS)


class WinogradConv(ConvKernel):
    """One layer's prepared Winograd convolution with output tile ``m`` (2 or 4)."""

    def __init__(
        self,
        node: Node,
        types: Sequence[TensorType | None],
        values: Sequence[np.ndarray | None],
        m: int,
    ):
        super().__init__(node, types, values)
        s = self.setup
        w = values[1]
        assert w is not None and s.kernel == (3, 3) and s.group == 1
        self.m = m
        self.points = (m + 2) ** 2
        self.filters = transform_filters(w, m)  # (T, panels of 16 output channels)
        self.tile_count = s.batch * math.ceil(s.out[0] / m) * math.ceil(s.out[1] / m)
        # the zero-padded channels-last input: every tile's (m+2)^2 pixels inside it
        self.frame = (math.ceil(s.out[0] / m) * m + 2, math.ceil(s.out[1] / m) * m + 2)
        macs = self.tile_count * self.points * s.in_channels * s.out_channels
        self.small = macs < active_cpu_tuning().gemm_grain
        self._chunking: dict[int, tuple[int, int, int]] = {}

    def chunking(self, threads: int) -> tuple[int, int, int]:
        """(tiles per chunk, output channels per task, workers) for a thread count."""
        plan = self._chunking.get(threads)
        if plan is None:
            s = self.setup
            step, oc_step = chunking(self.points, s.in_channels, s.out_channels, self.tile_count, threads)
            tasks = math.ceil(self.tile_count / step) * math.ceil(s.out_channels / oc_step)
            plan = (step, oc_step, max(1, min(threads, tasks)))
            self._chunking[threads] = plan
        return plan

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Write the convolution of ``x`` into ``out`` (C-contiguous float32 of the output shape)."""
        s = self.setup
        step, oc_step, workers = self.chunking(1 if self.small else numba.get_num_threads())
        v_row, m_row = point_row(s.in_channels, step), point_row(oc_step, step)
        regions = worker_scratch(workers, self.points * (v_row + m_row))
        frame = self.frame
        x_size = s.batch * frame[0] * frame[1] * s.in_channels
        channels_last = scratch(x_size).reshape(s.batch * frame[0], frame[1], s.in_channels)
        call(
            winograd_conv_2d,
            workers == 1,
            np.ascontiguousarray(x),
            self.filters,
            self.bias,
            self.has_bias,
            self.m,
            s.pads[0],
            s.pads[1],
            *self.activation,
            step,
            oc_step,
            channels_last,
            regions,
            v_row,
            m_row,
            out,
        )


def winograd_f43(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> WinogradConv:
    return WinogradConv(node, types, values, 4)


def winograd_f23(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> WinogradConv:
    return WinogradConv(node, types, values, 2)


def can_run(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    """Whether Winograd applies at all, whatever the heuristic prefers (for `edgecnn tune`)."""
    return winograd_setup(node, types, values) is not None


register("winograd_f43", winograd_f43, when=when_winograd_f43, applies=can_run)
register("winograd_f23", winograd_f23, when=when_winograd_f23, applies=can_run)
