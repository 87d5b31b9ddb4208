"""The int8 GEMM on the dot-product micro-kernel (dot_kernel.py): weights packed once into
panels, activations written by im2col straight into the kernel's unit layout, and the requantising
epilogue applied to each tile while its int32 sums are still in cache.

Layouts (``unit`` depth steps per 32-bit unit: 4 bytes, or 2 int16):

- weights: (panels, groups, ROWS) units, a panel holding ROWS output channels (the last padded with
  zero rows), depth padded with zero weights to whole groups;
- columns: (blocks, groups, COLUMNS * unit) values: pixel p = b*COLUMNS + j's unit of group g at
  [b, g, j*unit:(j+1)*unit], so each micro-kernel call reads one contiguous run; pixels padded to
  whole blocks (the padding's sums are computed, never stored).

Activations enter the kernel unsigned: int8 data is shifted by +128 (``offset``) and its zero point
with it, so one packing serves both 8-bit types (the int16 loop takes them the same way).
"""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.gemm.epilogue import activate
from edgecnn.kernels.cpu.int8.dot_kernel import COLUMNS, ROWS, UNIT_U8S8, dot_s16, dot_u8s8
from edgecnn.kernels.cpu.int8.loops import receptive_row, requantized

TILE = 4 * COLUMNS
"""Pixels per task: the int32 tile (ROWS x TILE) the epilogue reads back stays in L1."""


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


@numba.njit(parallel=True, cache=True, nogil=True)
def gemm_dot(
    weights: np.ndarray,  # flat int32 panels (pack_weights)
    groups: int,
    bytes_mode: bool,  # u8 x s8 units (vpmaddubsw) else int16 units (vpmaddwd)
    columns: np.ndarray,  # flat uint8 view of the (blocks, groups, COLUMNS * unit) columns
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
    """out = requantise(W @ columns + bias), tile by tile: each task one panel of ROWS channels by
    TILE pixels, its int32 sums finished before the next task. Consecutive tasks share their
    pixels (a thread's run of tasks reads its columns from cache once per panel)."""
    rows, pixels = out.shape
    panels = (rows + ROWS - 1) // ROWS
    tiles = (pixels + TILE - 1) // TILE
    block_bytes = groups * COLUMNS * 4
    act = (alpha, low, high)
    for task in numba.prange(panels * tiles):
        panel = task % panels
        p0 = (task // panels) * TILE
        p1 = min(p0 + TILE, pixels)
        block = np.empty(ROWS * TILE, dtype=np.int32)
        a_off = panel * groups * ROWS
        for j in range(p0, p1, COLUMNS):
            b_off = (j // COLUMNS) * block_bytes
            if bytes_mode:
                dot_u8s8(groups, weights, a_off, columns, b_off, COLUMNS * 4, block, j - p0, TILE)
            else:
                dot_s16(groups, weights, a_off, columns, b_off, COLUMNS * 4, block, j - p0, TILE)
        for r in range(min(ROWS, rows - panel * ROWS)):
            m = panel * ROWS + r
            b = bias[m]
            sums = block[r * TILE : r * TILE + p1 - p0]
            target = out[m, p0:p1]
            if float_output:
                for p in range(p1 - p0):
                    v = np.float32(np.float32(sums[p] + b) * multiplier[m])
                    target[p] = activate(v, kind, alpha, low, high)
            else:
                for p in range(p1 - p0):
                    target[p] = requantized(
                        sums[p] + b, multiplier[m], y_scale, zero_point, lo, hi, kind, act
                    )
