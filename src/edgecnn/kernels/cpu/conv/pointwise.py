"""1x1 convolution on the micro-kernel, its input read in place: no im2col, no packing of B.

A 1x1 layer's input already is the GEMM's right operand (channels x pixels, row stride H*W). The
micro-kernel reads each depth step's COLUMNS pixels straight from the input plane, multiplies them by
the weights packed once at plan time, and the bias + activation run on each ROWS-channel block of a
chunk of pixels while it is still in L1.

Why: on the narrow layers of SqueezeNet, MobileNetV2 and ShuffleNetV2 (16 to 160 input channels)
there are few multiply-adds per output value, so what the BLAS tiles do around the GEMM (sgemm
packs both operands on every call, then a separate epilogue pass reads the tile back) costs as
much as the multiplications. The rule's thresholds (which 1x1 layers it takes) are
``CpuTuning.pointwise_max_depth``, ``narrow_depth``, ``narrow_outputs`` and ``deep_min_pixels``:
deeper layers with more outputs lose (each depth step of a run is a cache line of its own, and from
about 160 steps those lines and the weights no longer fit in L1 together), except on large maps,
where splitting by pixels lets each core read what it wrote.

Tiles: (image, chunk of CHUNK_BYTES of input columns, rows of output channels); a thread takes a
contiguous run of tiles, so consecutive 1x1 layers split their pixels the same way and each thread
reads what it wrote. When the chunks are fewer than the threads, the output channels are split (in
multiples of ROWS) if there are MIN_SPLIT_ROWS per thread, else the chunks are narrowed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.packed import pack_conv_weights
from edgecnn.kernels.cpu.conv.setup import ResidualIntoKernel
from edgecnn.kernels.cpu.conv.tiled_gemm import rows_epilogue
from edgecnn.kernels.cpu.gemm.microkernel import (
    COLUMNS,
    LINE,
    ROWS,
    micro_kernel,
    micro_kernel_finished,
    prefetch,
)
from edgecnn.kernels.cpu.gemm.packed_gemm import DEPTH_BLOCK
from edgecnn.kernels.cpu.system.common import worker_scratch
from edgecnn.kernels.cpu.system.threads import current_threads, small_conv
from edgecnn.kernels.cpu.system.twins import parallel_and_serial

CHUNK_BYTES = 64 << 10
"""Input bytes of one chunk (its channels x pixels): re-read from L2 by every 6-channel block."""

MIN_SPLIT_ROWS = 4 * ROWS
"""Output channels per thread from which a map too small to give every thread a chunk is shared
by channels rather than by narrower chunks: MobileNetV2's 64 -> 384 and 96 -> 576 on 14x14 maps
split by pixels ran at 1.28-1.32x the BLAS tiles' time (which split the channels; one chunk of 112
pixels and one of 84, each ending in a cut run), and SqueezeNet's 48 -> 192 at 13x13 at 0.93x."""


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _even_chunk(batch: int, pixels: int, chunk: int, threads: int) -> int:
    """``chunk`` narrowed so that the images' chunks are about equal and their count a multiple of
    ``threads``, where there are at least as many chunks as threads: a thread takes a contiguous run
    of them, so SqueezeNet's 16->64 @ 55x55 in 3 chunks of 1024 pixels (the last 977) gave one
    thread twice the other's work, and its 32->128 @ 27x27 in chunks of 512 and 217 pixels 2.4x;
    now 4 chunks of 768 and 2 of 368."""
    count = math.ceil(pixels / chunk)
    if threads == 1 or batch * count < threads:
        return chunk
    while (batch * count) % threads:
        count += 1
    even = max(COLUMNS, _round_up(math.ceil(pixels / count), COLUMNS))
    return even if math.ceil(pixels / even) == count else chunk


def pointwise_tiles(batch: int, rows: int, depth: int, pixels: int, threads: int) -> tuple[int, int, int]:
    """(output channels per tile, pixels per tile, workers)."""
    chunk = max(COLUMNS, CHUNK_BYTES // (4 * max(depth, 1)) // COLUMNS * COLUMNS)
    chunk = min(chunk, _round_up(pixels, COLUMNS))
    chunk = _even_chunk(batch, pixels, chunk, threads)
    chunks = batch * math.ceil(pixels / chunk)
    if threads > 1 and chunks < threads and rows < MIN_SPLIT_ROWS * threads:
        # too few channels to share: narrower chunks (each cut run of pixels costs a whole one)
        chunk = max(COLUMNS, _round_up(math.ceil(pixels / math.ceil(threads / batch)), COLUMNS))
        chunks = batch * math.ceil(pixels / chunk)
    splits = 1
    if threads > 1 and chunks < threads:
        splits = min(math.ceil(threads / chunks), math.ceil(rows / ROWS))
    row_step = _round_up(math.ceil(rows / splits), ROWS)
    tasks = chunks * math.ceil(rows / row_step)
    return row_step, chunk, max(1, min(threads, tasks))


@numba.njit(cache=True)
def _pointwise_tasks(
    worker: int,
    workers: int,
    x: np.ndarray,  # (N, K, H, W), C-contiguous
    packed: np.ndarray,  # pack_weights of the (M, K) matrix
    bias: np.ndarray,
    has_bias: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    row_step: int,
    chunk: int,
    edge: np.ndarray,  # (workers, K * COLUMNS) scratch: each image's last, cut run of pixels
    residual: np.ndarray,  # (N, M, H, W) added before the activation, or empty: none
    onto_out: bool,  # out already holds the residual (it is the residual's buffer): add onto it
    out: np.ndarray,  # (N, M, H, W), written
) -> None:
    """Tiles [worker * tasks // workers, (worker + 1) * tasks // workers) of the layer."""
    batch, depth = x.shape[0], x.shape[1]
    rows = out.shape[1]
    pixels = out.shape[2] * out.shape[3]
    blocks = (rows + ROWS - 1) // ROWS
    x_flat = x.reshape(-1)
    c_flat = out.reshape(-1)
    out_rows = out.reshape(batch, rows, pixels)
    has_residual = residual.size > 0
    z_flat = residual.reshape(-1)
    panel = edge[worker]
    # the activation none, ReLU or a clip: the last pass's stores finish the block (bias, activation)
    finishing = kind == 0 or kind == 1 or kind == 3
    last_pass = (depth - 1) // DEPTH_BLOCK * DEPTH_BLOCK
    floor, ceiling = np.float32(low), np.float32(high)
    chunks = (pixels + chunk - 1) // chunk
    row_tiles = (rows + row_step - 1) // row_step
    tasks = batch * chunks * row_tiles
    for task in range(worker * tasks // workers, (worker + 1) * tasks // workers):
        m_tile = task % row_tiles
        rest = task // row_tiles
        p0 = (rest % chunks) * chunk
        n = rest // chunks
        p1 = min(p0 + chunk, pixels)
        m0 = m_tile * row_step
        m1 = min(m0 + row_step, rows)
        b_base = n * depth * pixels
        cut = p1 - (p1 - p0) % COLUMNS if p1 == pixels else p1  # runs before it read COLUMNS in-row pixels
        if cut < p1:  # the image's cut run, copied with zeros so no read leaves the input
            width = p1 - cut
            for k in range(depth):
                for j in range(COLUMNS):
                    panel[k * COLUMNS + j] = x_flat[b_base + k * pixels + cut + j] if j < width else 0.0
        for r0 in range(m0, m1, ROWS):
            count = min(ROWS, m1 - r0)
            c_row = (n * rows + r0) * pixels
            if has_residual:  # the block starts as the residual; every pass adds onto it
                for r in range(r0, r0 + count):
                    at = (n * rows + r) * pixels
                    c_flat[at + p0 : at + p1] = z_flat[at + p0 : at + p1]
            if has_residual or onto_out:
                for r in range(r0 + ROWS, min(r0 + 2 * ROWS, m1)):  # the next block's, while this one runs
                    for p in range(p0, p1, LINE):
                        prefetch(c_flat if onto_out else z_flat, (n * rows + r) * pixels + p)
            for k0 in range(0, depth, DEPTH_BLOCK):
                steps = min(DEPTH_BLOCK, depth - k0)
                a_at = k0 * blocks * ROWS + (r0 // ROWS) * steps * ROWS
                adding = k0 > 0 or has_residual or onto_out
                if finishing and k0 == last_pass:
                    for j0 in range(p0, cut, COLUMNS):
                        micro_kernel_finished(
                            steps, packed, a_at, x_flat, b_base + k0 * pixels + j0, pixels,
                            c_flat, c_row + j0, pixels, adding, count, COLUMNS, bias, r0, kind, floor, ceiling,
                        )  # fmt: skip
                    if cut < p1:
                        micro_kernel_finished(
                            steps, packed, a_at, panel, k0 * COLUMNS, COLUMNS,
                            c_flat, c_row + cut, pixels, adding, count, p1 - cut, bias, r0, kind, floor, ceiling,
                        )  # fmt: skip
                    continue
                for j0 in range(p0, cut, COLUMNS):
                    micro_kernel(
                        steps, packed, a_at, x_flat, b_base + k0 * pixels + j0, pixels,
                        c_flat, c_row + j0, pixels, adding, count, COLUMNS,
                    )  # fmt: skip
                if cut < p1:
                    micro_kernel(
                        steps, packed, a_at, panel, k0 * COLUMNS, COLUMNS,
                        c_flat, c_row + cut, pixels, adding, count, p1 - cut,
                    )  # fmt: skip
            if not finishing:
                rows_epilogue(out_rows[n], r0, r0 + count, p0, p1, bias, has_bias, kind, alpha, low, high)


def _pointwise_conv_2d(
    x: np.ndarray,
    packed: np.ndarray,
    bias: np.ndarray,
    has_bias: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    row_step: int,
    chunk: int,
    edge: np.ndarray,
    residual: np.ndarray,
    onto_out: bool,
    out: np.ndarray,
) -> None:
    """All tiles, ``edge.shape[0]`` workers side by side (one parallel region per layer)."""
    workers = edge.shape[0]
    for worker in numba.prange(workers):
        _pointwise_tasks(
            worker,
            workers,
            x,
            packed,
            bias,
            has_bias,
            kind,
            alpha,
            low,
            high,
            row_step,
            chunk,
            edge,
            residual,
            onto_out,
            out,
        )


pointwise_conv_2d, pointwise_conv_2d_serial = parallel_and_serial(_pointwise_conv_2d, "pointwise_conv_2d")


class PointwiseConv(ResidualIntoKernel):
    """A 1x1 layer's packed weights and tiling; runs the tiles on numba's threads."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        s = self.setup
        w = values[1]
        assert w is not None and s.pointwise and s.group == 1
        self.packed = pack_conv_weights(w, s)[0]
        self.small = small_conv(s.batch * s.out_channels * self.pixels * s.in_channels)

    def plan_tiles(self, threads: int) -> tuple[int, int, int]:
        s = self.setup
        return pointwise_tiles(s.batch, s.out_channels, s.in_channels, self.pixels, threads)

    def _run(
        self,
        out: np.ndarray,
        x: np.ndarray,
        residual: np.ndarray,
        activation: tuple[int, float, float, float],
    ) -> None:
        row_step, chunk, workers = self.tiles(1 if self.small else current_threads())
        per_worker = self.setup.in_channels * COLUMNS
        edge = worker_scratch(workers, per_worker)
        kernel = pointwise_conv_2d_serial if workers == 1 else pointwise_conv_2d
        onto_out = residual.size > 0 and np.may_share_memory(residual, out)  # the arena's in-place sum
        kernel(
            np.ascontiguousarray(x), self.packed, self.bias, self.has_bias, *activation, row_step, chunk, edge,
            residual[:0] if onto_out else residual, onto_out, out,
        )  # fmt: skip
