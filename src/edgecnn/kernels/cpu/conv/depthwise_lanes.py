"""Float depthwise convolution with the channels in the vector lanes: small planes, large filters.

On a 7x7 or 14x14 map a plane-by-plane kernel (depthwise.py) runs rows of 7 or 14 floats on
8- or 16-float vectors: most of each tap's loop is its remainder, and the per-plane work (the
padded copy, the epilogue's calls) weighs as much as the taps. Here, as in NHWC / NCHWc depthwise
kernels, a block of ``LANES`` channels shares the vector lanes: the block's input is copied
channels-last into a zero-bordered buffer (each pixel's channels side by side, the columns dealt
into stride phases as ``depthwise.fill_padded`` deals them), so that every tap of every output
pixel is one whole vector load whatever the plane's width or stride, and no lane is wasted.

numba's loops cannot keep running sums in registers, nor tell LLVM that a loop's arrays do not
overlap (a loop over more than a few of them is then left scalar), so the three inner parts are
LLVM vector code written here, as gemm/microkernel.py writes its kernel: ``gather_cells`` deals
the planes channels-last (LANES x LANES in-register transposes), ``lane_row`` sums the taps of
CELL_BLOCK output pixels in registers, each weight vector loaded once per block, and
``scatter_cells`` transposes the sums back to NCHW. Between the last two, the fused activation
runs over the block's channels-last sums (contiguous: vector code for every kind).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.base import BaseContext
from numba.core.types import Type
from numba.core.typing import Signature
from numba.core.typing.context import BaseContext as TypingContext

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.depthwise import pass_input, read_only, tap_column
from edgecnn.kernels.cpu.conv.setup import ConvKernel, ConvSetup, conv_setup
from edgecnn.kernels.cpu.conv.steps import when_depthwise
from edgecnn.kernels.cpu.gemm.epilogue import activate_in_place
from edgecnn.kernels.cpu.gemm.microkernel import LANES, Codegen, _intrinsic, _vector_pointer
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import worker_scratch
from edgecnn.kernels.cpu.system.threads import call, current_threads, is_small, worker_share

CELL_BLOCK = 4
"""Output cells (pixels of LANES channels) whose sums ``lane_row`` holds in registers at once:
each tap's weight vector is loaded once per block, a quarter of a load per multiply-add."""

SMALL_ROW = 2 * LANES
"""3x3 layers with output rows narrower than this run channels-last: below two vectors a
plane-by-plane row spends most of each tap's loop in its scalar remainder or in positions computed
and dropped."""

FLAT_PLANE = 4 * LANES
"""Output planes from which a 3x3 stride-1 layer stays plane by plane: depthwise.py runs it as one
flat pass over the plane with its nine taps in registers, which fills its vectors once the plane
is four of them long, and needs neither of this kernel's two transposes."""


def _data(
    context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value], i: int
) -> ir.Value:
    """The data pointer of array argument ``i``."""
    return context.make_array(sig.args[i])(context, builder, args[i]).data


def _cells(
    builder: ir.IRBuilder,
    pointers: tuple[ir.Value, ir.Value, ir.Value, ir.Value, ir.Value],
    at: tuple[ir.Value, ir.Value, ir.Value, ir.Value],
    taps: ir.Value,
    first: ir.Value,
    count: int,
) -> None:
    """The LLVM code of ``count`` cells from cell ``first``: sums start at the bias vector, one
    multiply-add per tap and cell (marked contractible: an FMA where the CPU has one), stored once."""
    src, offsets, w, bias, out = pointers
    src_at, w_at, bias_at, out_at = at
    vector = ir.VectorType(ir.FloatType(), LANES)
    index = src_at.type
    lanes = ir.Constant(index, LANES)
    start = builder.mul(first, lanes)
    b = builder.load(_vector_pointer(builder, bias, bias_at, vector), align=4)
    sums = [cgutils.alloca_once_value(builder, b) for _ in range(count)]
    with cgutils.for_range(builder, taps) as loop:
        k = loop.index
        weight = builder.load(
            _vector_pointer(builder, w, builder.add(w_at, builder.mul(k, lanes)), vector), align=4
        )
        base = builder.add(builder.add(src_at, builder.load(builder.gep(offsets, [k]))), start)
        for i, total in enumerate(sums):
            value = builder.load(
                _vector_pointer(builder, src, builder.add(base, ir.Constant(index, i * LANES)), vector),
                align=4,
            )
            product = builder.fmul(weight, value, flags=("contract",))
            builder.store(builder.fadd(product, builder.load(total), flags=("contract",)), total)
    for i, total in enumerate(sums):
        target = builder.add(builder.add(out_at, start), ir.Constant(index, i * LANES))
        builder.store(builder.load(total), _vector_pointer(builder, out, target, vector), align=4)


@_intrinsic
def lane_row(
    typingctx: TypingContext, src: Type, src_at: Type, offsets: Type, taps: Type, w: Type, w_at: Type,
    bias: Type, bias_at: Type, out: Type, out_at: Type, cells: Type,
) -> tuple[Signature, Codegen]:  # fmt: skip
    """out[out_at + c * LANES + j] = bias[bias_at + j] + sum over k < taps of w[w_at + k * LANES + j]
    * src[src_at + offsets[k] + c * LANES + j], for cells c < ``cells`` and lanes j < LANES: one
    output row of a block of channels (1-D float32 arrays, int64 offsets; no bounds checks, the
    caller sizes them). Cells go CELL_BLOCK at a time, their sums in registers over every tap; a
    row not a multiple of CELL_BLOCK ends with the block of its last cells (some computed twice)."""
    signature = types.void(src, src_at, offsets, taps, w, w_at, bias, bias_at, out, out_at, cells)

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
    ) -> ir.Value:
        src_at_v, taps_v, w_at_v, bias_at_v, out_at_v, cells_v = (args[i] for i in (1, 3, 5, 7, 9, 10))
        src_p, offsets_p, w_p, bias_p, out_p = (
            _data(context, builder, sig, args, i) for i in (0, 2, 4, 6, 8)
        )
        pointers = (src_p, offsets_p, w_p, bias_p, out_p)
        at = (src_at_v, w_at_v, bias_at_v, out_at_v)
        block = ir.Constant(cells_v.type, CELL_BLOCK)
        with cgutils.for_range(builder, builder.sdiv(cells_v, block)) as loop:
            _cells(builder, pointers, at, taps_v, builder.mul(loop.index, block), CELL_BLOCK)
        short = builder.icmp_signed("<", cells_v, block)
        with builder.if_else(short) as (few, some):
            with few, cgutils.for_range(builder, cells_v) as loop:
                _cells(builder, pointers, at, taps_v, loop.index, 1)
            with some:
                ragged = builder.icmp_signed("!=", builder.srem(cells_v, block), ir.Constant(cells_v.type, 0))
                with builder.if_then(ragged):
                    _cells(builder, pointers, at, taps_v, builder.sub(cells_v, block), CELL_BLOCK)
        return context.get_dummy_value()

    return signature, codegen


def _transposed(builder: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """LANES vectors of LANES floats, transposed: vector k of the result holds lane k of every row.
    log2(LANES) rounds; in each, rows i and i + s (i's bit s clear) swap the upper s-lane half of
    every 2s-lane group of row i with the lower half of row i + s's, two shuffles per pair."""
    rows = list(rows)
    s = LANES // 2
    while s >= 1:
        for i in range(LANES):
            if i & s:
                continue
            low = [lane if not lane & s else LANES + lane - s for lane in range(LANES)]
            high = [lane + s if not lane & s else LANES + lane for lane in range(LANES)]
            a, b = rows[i], rows[i + s]
            masks = [ir.Constant(ir.VectorType(ir.IntType(32), LANES), m) for m in (low, high)]
            rows[i], rows[i + s] = (builder.shuffle_vector(a, b, m) for m in masks)
        s //= 2
    return rows


def _square_blocks(builder: ir.IRBuilder, count: ir.Value, block: Callable[[ir.Value], None]) -> None:
    """block(first) for first = 0, LANES, ... while a whole block fits in ``count``, then for the
    last LANES (overlapping the one before) where count is not a multiple; count >= LANES."""
    lanes = ir.Constant(count.type, LANES)
    with cgutils.for_range(builder, builder.sdiv(count, lanes)) as loop:
        block(builder.mul(loop.index, lanes))
    with builder.if_then(builder.icmp_signed("!=", builder.srem(count, lanes), ir.Constant(count.type, 0))):
        block(builder.sub(count, lanes))


@_intrinsic
def gather_cells(
    typingctx: TypingContext, x: Type, x_at: Type, plane: Type, valid: Type, cell_at: Type, flat: Type,
    pixels: Type,
) -> tuple[Signature, Codegen]:  # fmt: skip
    """flat[cell_at[p] + j] = x[x_at + min(j, valid - 1) * plane + p] for the ``pixels`` >= LANES
    pixels p of a block of planes with cell_at[p] >= 0 (-1: a pixel the buffer does not hold) and
    lanes j < LANES: the planes' pixels dealt channels-last, LANES pixels of LANES planes per
    in-register transpose. Lanes past ``valid`` read the last valid plane again."""
    signature = types.void(x, x_at, plane, valid, cell_at, flat, pixels)

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
    ) -> ir.Value:
        x_at_v, plane_v, valid_v, pixels_v = (args[i] for i in (1, 2, 3, 6))
        x_p, cell_p, flat_p = (_data(context, builder, sig, args, i) for i in (0, 4, 5))
        vector = ir.VectorType(ir.FloatType(), LANES)
        index = x_at_v.type
        last = builder.sub(valid_v, ir.Constant(index, 1))
        starts = []
        for j in range(LANES):
            plane_of = builder.select(
                builder.icmp_signed("<", ir.Constant(index, j), valid_v), ir.Constant(index, j), last
            )
            starts.append(builder.add(x_at_v, builder.mul(plane_of, plane_v)))

        def block(first: ir.Value) -> None:
            rows = [
                builder.load(_vector_pointer(builder, x_p, builder.add(start, first), vector), align=4)
                for start in starts
            ]
            for k, column in enumerate(_transposed(builder, rows)):
                target = builder.load(builder.gep(cell_p, [builder.add(first, ir.Constant(index, k))]))
                with builder.if_then(builder.icmp_signed(">=", target, ir.Constant(index, 0))):
                    builder.store(column, _vector_pointer(builder, flat_p, target, vector), align=4)

        _square_blocks(builder, pixels_v, block)
        return context.get_dummy_value()

    return signature, codegen


@_intrinsic
def scatter_cells(
    typingctx: TypingContext, acc: Type, out: Type, out_at: Type, pixels: Type, valid: Type
) -> tuple[Signature, Codegen]:  # fmt: skip
    """out[out_at + j * pixels + p] = acc[p * LANES + j] for the ``pixels`` >= LANES cells p and
    lanes j < ``valid``: a block's channels-last sums back to its NCHW planes, LANES cells per
    in-register transpose."""
    signature = types.void(acc, out, out_at, pixels, valid)

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
    ) -> ir.Value:
        out_at_v, pixels_v, valid_v = args[2:]
        acc_p, out_p = (_data(context, builder, sig, args, i) for i in (0, 1))
        vector = ir.VectorType(ir.FloatType(), LANES)
        index = out_at_v.type
        lanes = ir.Constant(index, LANES)

        def block(first: ir.Value) -> None:
            start = builder.mul(first, lanes)
            rows = [
                builder.load(
                    _vector_pointer(
                        builder, acc_p, builder.add(start, ir.Constant(index, k * LANES)), vector
                    ),
                    align=4,
                )
                for k in range(LANES)
            ]
            for j, plane in enumerate(_transposed(builder, rows)):
                with builder.if_then(builder.icmp_signed("<", ir.Constant(index, j), valid_v)):
                    target = builder.add(
                        builder.add(out_at_v, builder.mul(ir.Constant(index, j), pixels_v)), first
                    )
                    builder.store(plane, _vector_pointer(builder, out_p, target, vector), align=4)

        _square_blocks(builder, pixels_v, block)
        return context.get_dummy_value()

    return signature, codegen


@numba.njit(cache=True, nogil=True)
def cell_layout(
    height: int,
    width: int,
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
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Where ``depthwise_lanes`` keeps a block's input, in floats: each input pixel's first float
    in the buffer (-1 where no output reads it), each tap's first float for output cell (0, 0),
    a buffer row's floats and the buffer's.

    Buffer row r holds padded input row r, ``span`` cells of LANES floats, padded column X at cell
    X % stride_w * phase_w + X // stride_w: output (oy, ox) reads tap (ki, kj) at cell
    (oy * stride_h + ki * dilation_h) * span + ox + (kj * dilation_w's cell)."""
    rows = (out_h - 1) * stride_h + (kernel_h - 1) * dilation_h + 1
    phase_w = out_w + ((kernel_w - 1) * dilation_w) // stride_w
    span = stride_w * phase_w
    x0 = max(0, -pad_left)  # the input columns the buffer holds
    x1 = min(width, span - pad_left)
    y0, y1 = max(0, -pad_top), min(height, rows - pad_top)
    cell_at = np.full(height * width, -1, dtype=np.int64)
    for iy in range(y0, y1):
        for ix in range(x0, x1):
            column = ix + pad_left
            cell = (iy + pad_top) * span + tap_column(column, stride_w, phase_w)
            cell_at[iy * width + ix] = cell * LANES
    offsets = np.empty(kernel_h * kernel_w, dtype=np.int64)
    for ki in range(kernel_h):
        for kj in range(kernel_w):
            cell = ki * dilation_h * span + tap_column(kj * dilation_w, stride_w, phase_w)
            offsets[ki * kernel_w + kj] = cell * LANES
    return cell_at, offsets, span * LANES, rows * span * LANES


@numba.njit(parallel=True, nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def depthwise_lanes(
    x: np.ndarray,  # (N, C, H, W)
    taps: np.ndarray,  # (blocks, KH * KW, LANES), the last axis LANES long: channel b * LANES + j, 0 past C
    bias: np.ndarray,  # (blocks, LANES), 0 past C (and where the layer has none)
    cell_at: np.ndarray,  # (H * W,) int64: ``cell_layout``
    offsets: np.ndarray,  # (KH * KW,) int64: ``cell_layout``
    row_floats: int,  # ``cell_layout``
    flat_floats: int,  # ``cell_layout``
    stride_h: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    buffers: np.ndarray,  # (workers, >= flat_floats + OH * OW * LANES) float32 scratch
    out: np.ndarray,  # (N, C, OH, OW), written
) -> None:
    """out = act(depthwise conv(x) + bias), tasks of (image, block of LANES channels), one
    contiguous share per worker, each in its own row of ``buffers``: the block's input where
    ``cell_layout`` puts it, then the block's sums. The border is zeroed once per call and worker
    (the same cells every block); lanes past the last channel hold whatever the previous block
    left and are never written back."""
    batch, channels, height, width = x.shape
    blocks, count_taps, lanes = taps.shape
    out_h, out_w = out.shape[2], out.shape[3]
    plane, pixels = height * width, out_h * out_w
    x_flat, out_flat = x.reshape(-1), out.reshape(-1)
    taps_flat, bias_flat = taps.reshape(-1), bias.reshape(-1)
    tasks = batch * blocks
    workers = buffers.shape[0]
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, tasks)
        flat = buffers[worker, :flat_floats]
        flat[:] = 0.0
        acc = buffers[worker, flat_floats : flat_floats + pixels * lanes]
        for task in range(first, end):
            n, block = task // blocks, task % blocks
            c0 = block * lanes
            cb = min(lanes, channels - c0)
            source = (n * channels + c0) * plane
            if plane >= lanes:
                gather_cells(x_flat, source, plane, cb, cell_at, flat, plane)
            else:
                for p in range(plane):
                    if cell_at[p] >= 0:
                        for j in range(cb):
                            flat[cell_at[p] + j] = x_flat[source + j * plane + p]
            for oy in range(out_h):
                lane_row(
                    flat, oy * stride_h * row_floats, offsets, count_taps, taps_flat, block * count_taps * lanes,
                    bias_flat, block * lanes, acc, oy * out_w * lanes, out_w,
                )  # fmt: skip
            activate_in_place(acc, np.uint64(0), np.uint64(pixels * lanes), kind, alpha, low, high)
            target = (n * channels + c0) * pixels
            if pixels >= lanes:
                scatter_cells(acc, out_flat, target, pixels, cb)
            else:
                for j in range(cb):
                    for p in range(pixels):
                        out_flat[target + j * pixels + p] = acc[p * lanes + j]


class DepthwiseLanes(ConvKernel):
    """A depthwise layer (``when_lanes``), channels in the vector lanes: the
    filters and bias packed once into blocks of LANES channels (zeros past the last)."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        s = self.setup
        w = values[1]
        assert w is not None
        blocks = -(-s.out_channels // LANES)
        taps = np.zeros((blocks * LANES, s.kernel[0] * s.kernel[1]), dtype=np.float32)
        taps[: s.out_channels] = w.reshape(s.out_channels, -1)
        self.taps = read_only(np.ascontiguousarray(taps.reshape(blocks, LANES, -1).transpose(0, 2, 1)))
        bias = np.zeros(blocks * LANES, dtype=np.float32)
        bias[: s.out_channels] = self.bias
        self.block_bias = read_only(bias.reshape(blocks, LANES))
        self.small = is_small(int(np.prod(self.out_shape)) * s.kernel[0] * s.kernel[1])
        self.tasks = s.batch * blocks
        cell_at, offsets, self.row_floats, self.flat_floats = cell_layout(
            s.height, s.width, *s.window, *s.out
        )
        self.cell_at, self.offsets = read_only(cell_at), read_only(offsets)
        self.worker_floats = self.flat_floats + s.out[0] * s.out[1] * LANES

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        workers = max(1, min(1 if self.small else current_threads(), self.tasks))
        call(
            depthwise_lanes,
            self.small,
            pass_input(x),
            self.taps,
            self.block_bias,
            self.cell_at,
            self.offsets,
            self.row_floats,
            self.flat_floats,
            self.setup.strides[0],
            *self.activation,
            worker_scratch(workers, self.worker_floats),
            out,
        )


def can_run_in_lanes(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """A depthwise layer (``steps.when_depthwise``) with one filter per input channel."""
    if not when_depthwise(node, types, values):
        return False
    s = conv_setup(node, types)
    assert s is not None
    return s.out_channels == s.in_channels


def lanes_layer(setup: ConvSetup) -> bool:
    """Whether ``when_lanes`` picks a compiled layer: depthwise with one filter per input channel,
    and a filter other than 3x3 (depthwise.py's banded pass loads and stores its sums once per
    filter row, here they stay in registers over every tap), or a 3x3 filter on output rows
    narrower than SMALL_ROW, at stride 1 only on planes smaller than FLAT_PLANE."""
    if not (setup.depthwise and setup.out_channels == setup.in_channels):
        return False
    if setup.kernel != (3, 3):
        return True
    flat = setup.strides == (1, 1) and setup.out[0] * setup.out[1] >= FLAT_PLANE
    return setup.out[1] < SMALL_ROW and not flat


def when_lanes(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    """A layer ``can_run_in_lanes`` that is a ``lanes_layer``."""
    if not can_run_in_lanes(node, types, values):
        return False
    s = conv_setup(node, types)
    assert s is not None
    return lanes_layer(s)


register("depthwise_lanes", DepthwiseLanes, when=when_lanes, applies=can_run_in_lanes)
