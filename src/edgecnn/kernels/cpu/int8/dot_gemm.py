"""The int8 GEMM on the dot-product micro-kernel (dot_kernel.py): weights packed once into
panels, activations in the kernel's unit layout, and the requantising epilogue applied to each tile
while its int32 sums are still in cache.

Layouts (``unit`` depth steps per 32-bit unit: 4 bytes, or 2 int16):

- weights: (panels, groups, ROWS) units, a panel holding ROWS output channels (the last padded with
  zero rows), depth padded with zero weights to whole groups;
- columns: (blocks, groups, COLUMNS * unit) values: pixel p = b*COLUMNS + j's unit of group g at
  [b, g, j*unit:(j+1)*unit], so each micro-kernel call reads one contiguous run; pixels padded to
  whole blocks (the padding's sums are computed, never stored);
- or, for convolutions with unit strides, the padded image itself with its channels interleaved by
  units ("quads": (channel units, Hp, Wp) of 32 bits, ``pack_image``), read in place: depth group
  (channel unit, ki, kj) of virtual pixel q = oy*Wp + ox is the unit at q plus the tap's offset, so
  COLUMNS consecutive virtual pixels are one contiguous run. The columns ox >= OW of each virtual
  row are computed and dropped (2 of 58 at 56x56, 2 of 9 at 7x7); no im2col matrix is written.

Activations enter the kernel unsigned: int8 data is shifted by +128 (``offset``) and its zero point
with it, so one packing serves both 8-bit types (the int16 loop takes them the same way).
"""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.gemm.epilogue import activate
from edgecnn.kernels.cpu.int8.dot_kernel import COLUMNS, ROWS, UNIT_U8S8, dot_s16, dot_u8s8
from edgecnn.kernels.cpu.int8.loops import ROUNDING_LIMIT, receptive_row, requantized, saturated

TILE = 4 * COLUMNS
"""Pixels per tile: the int32 block (ROWS x TILE) the epilogue reads back stays in L1."""

MIN_TASKS = 16
"""Tasks a GEMM is cut into at least (panels shared out where the map has few tiles)."""


def groups_of(depth: int, unit: int) -> int:
    """Units a row of ``depth`` steps fills."""
    return (depth + unit - 1) // unit


def pixel_blocks(pixels: int) -> int:
    """Micro-kernel blocks of COLUMNS pixels that ``pixels`` fill."""
    return (pixels + COLUMNS - 1) // COLUMNS


def pack_weights(weights: np.ndarray, unit: int) -> np.ndarray:
    """(rows, depth) int8 weights -> the flat int32 panel array the micro-kernel reads: bytes for
    unit 4 (UNIT_U8S8), int16 for unit 2 (UNIT_S16)."""
    rows, depth = weights.shape
    panels = (rows + ROWS - 1) // ROWS
    groups = groups_of(depth, unit)
    dtype = np.int8 if unit == UNIT_U8S8 else np.int16
    padded = np.zeros((panels * ROWS, groups * unit), dtype=dtype)
    padded[:rows, :depth] = weights
    # (panel, r, group, step) -> (panel, group, r, step)
    packed = padded.reshape(panels, ROWS, groups, unit).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(packed).reshape(-1).view(np.int32)


@numba.njit(parallel=True, cache=True, nogil=True)
def im2col_units(
    image: np.ndarray,  # (C, H, W) 8-bit
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
    pad_value: int,  # the input zero point
    offset: int,  # added to every value: 128 for int8 data, 0 for uint8
    unit: int,
    columns: np.ndarray,  # (blocks, groups, COLUMNS) uint32, written
) -> None:
    """Receptive fields into the kernel's unit layout: depth step k = (c, ki, kj) of pixel p is
    value k % unit of the unit at columns[p // COLUMNS, k // unit, p % COLUMNS] (bytes for unit 4,
    int16 for unit 2, little-endian). One task per group: its rows copied as im2col rows, then
    interleaved. Depth steps past the last (zero weights) and pixels past the last (never stored)
    read the zero point."""
    channels = image.shape[0]
    depth = channels * kernel_h * kernel_w
    blocks, groups, _ = columns.shape
    pixels = out_h * out_w
    flip = np.uint32(offset)
    for g in numba.prange(groups):
        rows = np.empty((unit, blocks * COLUMNS), dtype=image.dtype)
        for t in range(unit):
            k = g * unit + t
            rows[t, pixels:] = pad_value
            if k < depth:
                receptive_row(
                    image, k, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left,
                    dilation_h, dilation_w, out_h, out_w, pad_value, rows[t, :pixels],
                )  # fmt: skip
            else:
                rows[t, :pixels] = pad_value
        shifted = rows.view(np.uint8)
        for b in range(blocks):
            dest = columns[b, g]
            for lane in range(COLUMNS):
                p = b * COLUMNS + lane
                if unit == UNIT_U8S8:  # int8 data: +128 is a flip of the sign bit
                    packed = np.uint32((shifted[0, p] ^ flip) | (shifted[1, p] ^ flip) << 8)
                    packed |= np.uint32((shifted[2, p] ^ flip) << 16 | (shifted[3, p] ^ flip) << 24)
                else:
                    packed = np.uint32(
                        ((np.int32(rows[0, p]) + offset) & 0xFFFF) | (np.int32(rows[1, p]) + offset) << 16
                    )
                dest[lane] = packed


def tap_weights(weights: np.ndarray, unit: int) -> np.ndarray:
    """(M, C, KH, KW) weights -> (M, depth) in the in-place layout's depth order: (channel unit,
    ki, kj, channel within the unit), channels padded with zero weights to whole units."""
    m, c, kh, kw = weights.shape
    units = groups_of(c, unit)
    padded = np.zeros((m, units * unit, kh, kw), dtype=weights.dtype)
    padded[:, :c] = weights
    return np.ascontiguousarray(padded.reshape(m, units, unit, kh, kw).transpose(0, 1, 3, 4, 2)).reshape(
        m, -1
    )


def tap_offsets(
    units: int, height: int, width: int, kernel: tuple[int, int], dilation: tuple[int, int]
) -> np.ndarray:
    """Byte offset of each depth group (channel unit, ki, kj) in a quad image of (height, width)."""
    ki, kj = np.meshgrid(np.arange(kernel[0]), np.arange(kernel[1]), indexing="ij")
    taps = (ki * dilation[0] * width + kj * dilation[1]).reshape(-1)
    planes = np.arange(units) * height * width
    return (4 * (planes[:, None] + taps[None, :])).reshape(-1).astype(np.int64)


@numba.njit(parallel=True, cache=True, nogil=True)
def pack_image(
    image: np.ndarray,  # (C, H, W) 8-bit
    pad_top: int,
    pad_left: int,
    pad_value: int,  # the input zero point
    offset: int,  # added to every value: 128 for int8 data, 0 for uint8
    unit: int,
    quads: np.ndarray,  # (units, Hp, Wp) uint32 view of a buffer with slack after it, written
    slack: np.ndarray,  # the units after ``quads`` that the last blocks read, written
) -> None:
    """The padded image with its channels interleaved by units (pack_image's layout above);
    padding and the channels past the last hold the zero point."""
    channels, height, width = image.shape
    units, padded_h = quads.shape[0], quads.shape[1]
    if unit == 4:
        pad_unit = np.uint32((pad_value + offset) & 0xFF) * np.uint32(0x01010101)
    else:
        pad_unit = np.uint32((pad_value + offset) & 0xFFFF) * np.uint32(0x00010001)
    slack[:] = pad_unit
    for u in numba.prange(units):
        plane = quads[u]
        for y in range(padded_h):
            iy = y - pad_top
            row = plane[y]
            if iy < 0 or iy >= height or u * unit >= channels:
                row[:] = pad_unit
                continue
            row[:pad_left] = pad_unit
            row[pad_left + width :] = pad_unit
            if unit == 4:  # one strided byte run per channel; int8 data: +128 flips the sign bit
                octets = row.view(np.uint8)
                for t in range(4):
                    c = u * 4 + t
                    at = 4 * pad_left + t
                    if c >= channels:
                        octets[at : at + 4 * width : 4] = np.uint8(pad_unit & 0xFF)
                        continue
                    source = image[c, iy].view(np.uint8)
                    for x in range(width):
                        octets[at + 4 * x] = source[x] ^ np.uint8(offset)
            else:
                shorts = row.view(np.int16)
                for t in range(2):
                    c = u * 2 + t
                    at = 2 * pad_left + t
                    if c >= channels:
                        shorts[at : at + 2 * width : 2] = np.int16(pad_value + offset)
                        continue
                    source = image[c, iy]
                    for x in range(width):
                        shorts[at + 2 * x] = np.int16(source[x]) + np.int16(offset)


@numba.njit(parallel=True, cache=True, nogil=True)
def gemm_dot(
    weights: np.ndarray,  # flat int32 panels (pack_weights)
    groups: int,
    bytes_mode: bool,  # u8 x s8 units (vpmaddubsw) else int16 units (vpmaddwd)
    columns: np.ndarray,  # flat uint8: the packed columns, or a quad image (and its slack)
    rows: np.ndarray,  # (groups,) int64: byte offset of each depth group's row from a block's start
    block_stride: int,  # bytes from one block of COLUMNS virtual pixels to the next
    row_pixels: int,  # virtual pixels per output row (OW for packed columns, Wp in place)
    out_w: int,
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
    out: np.ndarray,  # (M, OH*OW): 8-bit, or float32 if float_output
) -> None:
    """out = requantise(W @ columns + bias), tile by tile: each task TILE virtual pixels by a run of
    panels of ROWS channels (all of them where the map has tiles enough to share between threads),
    each panel's int32 sums finished before the next; the tile's columns stay in cache meanwhile."""
    channels = out.shape[0]
    out_h = out.shape[1] // out_w
    virtual = out_h * row_pixels
    panels = (channels + ROWS - 1) // ROWS
    tiles = (virtual + TILE - 1) // TILE
    chunks = max(1, min(panels, (MIN_TASKS + tiles - 1) // tiles))
    per_chunk = (panels + chunks - 1) // chunks
    act = (alpha, low, high)
    for task in numba.prange(tiles * chunks):
        q0 = (task // chunks) * TILE
        q1 = min(q0 + TILE, virtual)
        # the tile's runs of stored pixels (one per output row; virtual pixels past out_w dropped)
        runs = np.empty((3, TILE + 1), dtype=np.int64)  # start in the tile, length, output index
        count = 0
        q = q0
        while q < q1:
            oy, ox = q // row_pixels, q % row_pixels
            run = q1 - q if row_pixels == out_w else min(q1 - q, row_pixels - ox)
            stored = max(0, min(run, out_w - ox)) if row_pixels != out_w else run
            if stored > 0:
                runs[0, count], runs[1, count], runs[2, count] = q - q0, stored, oy * out_w + ox
                count += 1
            q += run
        block = np.empty(ROWS * TILE, dtype=np.int32)
        first = (task % chunks) * per_chunk
        for panel in range(first, min(panels, first + per_chunk)):
            a_off = panel * groups * ROWS
            for j in range(q0, q1, COLUMNS):
                b_off = (j // COLUMNS) * block_stride
                if bytes_mode:
                    dot_u8s8(groups, weights, a_off, columns, b_off, rows, block, j - q0, TILE)
                else:
                    dot_s16(groups, weights, a_off, columns, b_off, rows, block, j - q0, TILE)
            finish_panel(
                block, runs, count, panel, bias, multiplier, y_scale, zero_point, lo, hi,
                float_output, kind, act, out,
            )  # fmt: skip


@numba.njit(inline="always", cache=True)
def finish_panel(
    block: np.ndarray,
    runs: np.ndarray,
    count: int,
    panel: int,
    bias: np.ndarray,
    multiplier: np.ndarray,
    y_scale: float,
    zero_point: int,
    lo: int,
    hi: int,
    float_output: bool,
    kind: int,
    act: tuple,
    out: np.ndarray,
) -> None:
    """The epilogue of one panel's tile: bias, multiplier, activation, rounding, zero point and
    saturation, stored run by run."""
    alpha, low, high = act
    channels = out.shape[0]
    floor = np.float32(0.0) if kind == 1 else -ROUNDING_LIMIT
    for r in range(min(ROWS, channels - panel * ROWS)):
        m = panel * ROWS + r
        b = bias[m]
        scale = multiplier[m]
        target = out[m]
        for i in range(count):
            at, stored, to = r * TILE + runs[0, i], runs[1, i], runs[2, i]
            # slices, not offset indices: indices the compiler knows are >= 0 let the loops vectorise
            sums = block[at : at + stored]
            dest = target[to : to + stored]
            if float_output:
                for p in range(stored):
                    v = np.float32(np.float32(sums[p] + b) * scale)
                    dest[p] = activate(v, kind, alpha, low, high)
            elif kind <= 1:  # none or ReLU: requantized's steps without a branch
                for p in range(stored):
                    v = max(np.float32(np.float32(sums[p] + b) * scale), floor)
                    dest[p] = saturated(v, zero_point, lo, hi)
            else:
                for p in range(stored):
                    dest[p] = requantized(sums[p] + b, scale, y_scale, zero_point, lo, hi, kind, act)
