"""The int8 GEMM on the dot-product micro-kernel (dot_kernel.py): weights packed once into
panels, activations in the kernel's unit layout, and the requantising epilogue applied to each tile
while its int32 sums are still in cache.

Layouts (``unit`` depth steps per 32-bit unit: 4 bytes, or 2 int16):

- weights: (panels, groups, ROWS) units, a panel holding ROWS output channels (the last padded with
  zero rows), depth padded with zero weights to whole groups;
- activations: the padded image split into its stride phases (``pack_image``; one phase for unit
  strides), its channels interleaved by units: (channel units, phases, Hq, Wq) of 32 bits, plane
  (u, (py, px))[y, x] holding padded pixel (y*stride_h + py, x*stride_w + px). Tap (ki, kj) of
  output pixel (oy, ox) is then pixel (oy, ox) of its phase plane shifted by (ki*dilation_h //
  stride_h, kj*dilation_w // stride_w), so depth group (channel unit, ki, kj) of virtual pixel
  q = oy*Wq + ox is the unit at q plus the tap's offset (``tap_offsets``) and COLUMNS consecutive
  virtual pixels are one contiguous run, read in place: no im2col matrix is written, whatever the
  strides. The columns ox >= OW of each virtual row are computed and dropped (2 of 58 at 56x56 for
  a 3x3 stride-1 layer, 1 of 29 at 28x28 for a stride-2 one).

Activations enter the kernel unsigned: int8 data is shifted by +128 (``offset``) and its zero point
with it, so one packing serves both 8-bit types (the int16 loop takes them the same way).
"""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.int8.dot_kernel import COLUMNS, LANES, ROWS, UNIT_U8S8, VECTORS, dot_s16, dot_u8s8
from edgecnn.kernels.cpu.int8.loops import ROUNDING, ROUNDING_LIMIT, add_span, added, finish_row

TILE_BLOCKS = 4
TILE = TILE_BLOCKS * COLUMNS
"""Pixels per tile at most: the int32 block (ROWS x TILE) the epilogue reads back stays in L1."""

MIN_TASKS = 16
"""Tasks a GEMM is cut into at least (panels shared out where the map has few tiles)."""


@numba.njit(inline="always", cache=True)
def _share(count: int, parts: int, part: int) -> tuple[int, int]:
    """The ``part``-th of ``parts`` near-equal runs of ``count`` items: (start, end)."""
    return part * count // parts, (part + 1) * count // parts


@numba.njit(inline="always", cache=True)
def _whole(count: int, multiple: int, cap: int) -> int:
    """``count`` rounded up to a multiple of ``multiple``, at most ``cap``."""
    return min(cap, (count + multiple - 1) // multiple * multiple)


def groups_of(depth: int, unit: int) -> int:
    """Units a row of ``depth`` steps fills."""
    return (depth + unit - 1) // unit


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


def phases_of(kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int]) -> np.ndarray:
    """(phases, 2) int64: the (row, column) phases of the padded image modulo the strides that some
    tap reads, in order (one, (0, 0), for unit strides)."""
    rows = {ki * dilations[0] % strides[0] for ki in range(kernel[0])}
    columns = {kj * dilations[1] % strides[1] for kj in range(kernel[1])}
    return np.array([(py, px) for py in sorted(rows) for px in sorted(columns)], dtype=np.int64).reshape(
        -1, 2
    )


def phase_shape(
    out_hw: tuple[int, int], kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int]
) -> tuple[int, int]:
    """(Hq, Wq) of a phase plane: the output's rows and columns plus the farthest tap's reach."""
    return (
        out_hw[0] + (kernel[0] - 1) * dilations[0] // strides[0],
        out_hw[1] + (kernel[1] - 1) * dilations[1] // strides[1],
    )


def tap_offsets(
    units: int,
    phases: np.ndarray,
    plane: tuple[int, int],
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int],
) -> np.ndarray:
    """Byte offset of each depth group (channel unit, ki, kj) in a quad image of ``phases`` planes
    of ``plane`` (Hq, Wq) units: the tap's phase plane, then its row and column in that plane."""
    index = {(int(py), int(px)): i for i, (py, px) in enumerate(phases)}
    taps = []
    for ki in range(kernel[0]):
        for kj in range(kernel[1]):
            ry, rx = ki * dilations[0], kj * dilations[1]
            phase = index[(ry % strides[0], rx % strides[1])]
            taps.append((phase * plane[0] + ry // strides[0]) * plane[1] + rx // strides[1])
    planes = np.arange(units) * len(phases) * plane[0] * plane[1]
    return (4 * (planes[:, None] + np.array(taps)[None, :])).reshape(-1).astype(np.int64)


@numba.njit(inline="always", cache=True)
def _byte_units(
    row: np.ndarray, r0: np.ndarray, r1: np.ndarray, r2: np.ndarray, r3: np.ndarray, skip: int, step: int,
    flip: np.uint32, keep: np.uint32, pad: np.uint32,
) -> None:  # fmt: skip
    """row[x] = the bytes r0..r3[skip + x*step] in one unit, each XOR ``flip``; the bytes outside
    ``keep`` (channels past the last) from ``pad``. Whole units, so that the loop vectorises."""
    eight, sixteen, twenty_four = np.uint32(8), np.uint32(16), np.uint32(24)
    for x in range(row.size):
        i = skip + x * step
        v = (
            np.uint32(r0[i])
            | np.uint32(r1[i]) << eight
            | np.uint32(r2[i]) << sixteen
            | np.uint32(r3[i]) << twenty_four
        )
        row[x] = ((v ^ flip) & keep) | (pad & ~keep)


@numba.njit(inline="always", cache=True)
def _short_units(
    row: np.ndarray, r0: np.ndarray, r1: np.ndarray, skip: int, step: int, offset: int, keep: np.uint32,
    pad: np.uint32,
) -> None:  # fmt: skip
    """row[x] = r0, r1[skip + x*step] + ``offset`` as two int16 in one unit; the halves outside
    ``keep`` from ``pad``."""
    low, sixteen = np.int32(0xFFFF), np.uint32(16)
    for x in range(row.size):
        i = skip + x * step
        v = (
            np.uint32((np.int32(r0[i]) + offset) & low)
            | np.uint32((np.int32(r1[i]) + offset) & low) << sixteen
        )
        row[x] = (v & keep) | (pad & ~keep)


@numba.njit(inline="always", cache=True)
def unit_lanes(u: int, unit: int, channels: int, lane_mask: np.uint32) -> np.uint32:
    """The lanes of channel unit ``u`` that hold channels; the others hold the zero point."""
    keep = np.uint32(0)
    for t in range(unit):
        if u * unit + t < channels:
            keep |= lane_mask << np.uint32(t * 32 // unit)
    return keep


@numba.njit(parallel=True, cache=True, nogil=True)
def pack_image(
    image: np.ndarray,  # (C, H, W) 8-bit
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    phases: np.ndarray,  # (P, 2) int64: phases_of
    pad_value: int,  # the input zero point
    offset: int,  # added to every value: 128 for int8 data, 0 for uint8
    unit: int,
    quads: np.ndarray,  # (units, P, Hq, Wq) uint32 view of a buffer with slack after it, written
    slack: np.ndarray,  # the units after ``quads`` that the last blocks read, written
) -> None:
    """The padded image split into its stride phases, channels interleaved by units (the layout
    above): plane (u, p)[y, x] holds channel unit u of padded pixel (y*stride_h + py, x*stride_w +
    px); padding and the channels past the last hold the zero point."""
    channels, height, width = image.shape
    units, count, plane_h, plane_w = quads.shape
    if unit == 4:
        pad_unit = np.uint32((pad_value + offset) & 0xFF) * np.uint32(0x01010101)
        lane_mask = np.uint32(0xFF)
    else:
        pad_unit = np.uint32((pad_value + offset) & 0xFFFF) * np.uint32(0x00010001)
        lane_mask = np.uint32(0xFFFF)
    flip = np.uint32(offset) * np.uint32(0x01010101)  # int8 data: +128 flips each byte's sign bit
    slack[:] = pad_unit
    if stride_h == stride_w == 1:
        # unit strides (one phase): one task per channel unit, its plane padded whole where the
        # layer pads, then its channels' rows copied in, as one run where no column is padding
        # (the per-row bounds of the general loop below cost more than small maps' copies)
        flat = image.reshape(channels, height * width)
        dests = quads.reshape(units, plane_h * plane_w)
        rows, columns = min(height, plane_h - pad_top), min(width, plane_w - pad_left)
        padded = (plane_h, plane_w) != (height, width)
        for u in numba.prange(units):
            keep = unit_lanes(u, unit, channels, lane_mask)
            r0, r1 = flat[min(u * unit, channels - 1)], flat[min(u * unit + 1, channels - 1)]
            r2, r3 = flat[min(u * unit + 2, channels - 1)], flat[min(u * unit + 3, channels - 1)]
            dest = dests[u]
            if padded:
                dest[:] = pad_unit
            if columns == plane_w == width:
                at = pad_top * plane_w
                fill_units(
                    dest[at : at + rows * width], r0, r1, r2, r3, 0, 1, unit, flip, offset, keep, pad_unit
                )
                continue
            for y in range(rows):
                at, to = y * width, (y + pad_top) * plane_w + pad_left
                fill_units(
                    dest[to : to + columns], r0[at:], r1[at:], r2[at:], r3[at:], 0, 1, unit, flip, offset,
                    keep, pad_unit,
                )  # fmt: skip
        return
    for task in numba.prange(units * count):
        u, p = task // count, task % count
        py, px = phases[p, 0], phases[p, 1]
        # plane columns x whose image column x*stride_w + px - pad_left lies in [0, width)
        first = min(plane_w, max(0, (pad_left - px + stride_w - 1) // stride_w))
        end = min(plane_w, max(first, (width + pad_left - px + stride_w - 1) // stride_w))
        skip = first * stride_w + px - pad_left  # the image column of plane column ``first``
        keep = unit_lanes(u, unit, channels, lane_mask)
        c0, c1 = min(u * unit, channels - 1), min(u * unit + 1, channels - 1)
        c2, c3 = min(u * unit + 2, channels - 1), min(u * unit + 3, channels - 1)
        plane = quads[u, p]
        # rows y whose image row y*stride_h + py - pad_top lies in [0, height): the others are padding
        top = min(plane_h, max(0, (pad_top - py + stride_h - 1) // stride_h))
        bottom = min(plane_h, max(top, (height + pad_top - py + stride_h - 1) // stride_h))
        plane[:top] = pad_unit
        plane[bottom:] = pad_unit
        if u * unit >= channels:
            plane[top:bottom] = pad_unit
            continue
        for y in range(top, bottom):
            iy = y * stride_h + py - pad_top
            row = plane[y]
            row[:first] = pad_unit
            row[end:] = pad_unit
            r0, r1, r2, r3 = image[c0, iy], image[c1, iy], image[c2, iy], image[c3, iy]
            fill_units(row[first:end], r0, r1, r2, r3, skip, stride_w, unit, flip, offset, keep, pad_unit)


@numba.njit(inline="always", cache=True)
def fill_units(
    dest: np.ndarray, r0: np.ndarray, r1: np.ndarray, r2: np.ndarray, r3: np.ndarray, skip: int, step: int,
    unit: int, flip: np.uint32, offset: int, keep: np.uint32, pad: np.uint32,
) -> None:  # fmt: skip
    """dest = the units of the channel rows r0..r3 (r0, r1 for 2-step units) from column ``skip``
    on, every ``step``-th."""
    if unit == 4:
        b0, b1, b2, b3 = r0.view(np.uint8), r1.view(np.uint8), r2.view(np.uint8), r3.view(np.uint8)
        if step == 1:  # a constant step: the loads vectorise
            _byte_units(dest, b0, b1, b2, b3, skip, 1, flip, keep, pad)
        else:
            _byte_units(dest, b0, b1, b2, b3, skip, step, flip, keep, pad)
    elif step == 1:
        _short_units(dest, r0, r1, skip, 1, offset, keep, pad)
    else:
        _short_units(dest, r0, r1, skip, step, offset, keep, pad)


@numba.njit(parallel=True, cache=True, nogil=True)
def gemm_dot(
    weights: np.ndarray,  # flat int32 panels (pack_weights)
    groups: int,
    bytes_mode: bool,  # u8 x s8 units (vpmaddubsw) else int16 units (vpmaddwd)
    columns: np.ndarray,  # flat uint8: the quad image (pack_image) and its slack
    rows: np.ndarray,  # (groups,) int64: byte offset of each depth group's tap (tap_offsets)
    fix_starts: np.ndarray,  # the u8 x s8 loop's fix-up groups (dot_kernel.FixUps)
    fix_units: np.ndarray,
    fix_taps: np.ndarray,
    row_pixels: int,  # virtual pixels per output row (Wq)
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
    residual: np.ndarray,  # (M, OH*OW) 8-bit shortcut added to the 8-bit output, or no rows: none
    conv_first: bool,  # the output is the residual Add's first operand
    add: tuple,  # the Add's constants (eltwise.add_constants)
    threads: int,  # the threads the call runs on
) -> None:
    """out = requantise(W @ columns + bias), tile by tile: each task TILE virtual pixels by a run of
    panels of ROWS channels (all of them where the map has tiles enough to share between threads),
    each panel's int32 sums finished before the next; the tile's columns stay in cache meanwhile.
    With a residual, each run of 8-bit outputs is then QLinearAdd'ed with it where it lies."""
    channels = out.shape[0]
    out_h = out.shape[1] // out_w
    virtual = out_h * row_pixels
    panels = (channels + ROWS - 1) // ROWS
    blocks = (virtual + COLUMNS - 1) // COLUMNS
    # prange gives each thread one contiguous run of tasks: tiles and panel chunks in counts that
    # the threads share evenly, blocks and panels spread evenly over them, chunk-major
    tiles = _whole((blocks + TILE_BLOCKS - 1) // TILE_BLOCKS, threads, blocks)
    chunks = max(1, min(panels, (MIN_TASKS + tiles - 1) // tiles))
    if chunks > 1:
        chunks = _whole(chunks, threads, panels)
    act = (alpha, low, high)
    for task in numba.prange(tiles * chunks):
        b0, b1 = _share(blocks, tiles, task % tiles)
        q0 = b0 * COLUMNS
        q1 = min(b1 * COLUMNS, virtual)
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
        # a run's 8-bit outputs before the Add: apart from ``out``, as LLVM's overlap test
        # would send an Add reading and writing one array to its scalar loop
        codes = np.empty(TILE if residual.shape[0] else 0, dtype=out.dtype)
        first, last = _share(panels, chunks, task // tiles)
        for panel in range(first, last):
            a_off = panel * groups * ROWS
            for j in range(q0, q1, COLUMNS):
                b_off = 4 * j
                vectors = min(VECTORS, (q1 - j + LANES - 1) // LANES)  # narrower for the last pixels
                if bytes_mode:
                    dot_u8s8(
                        vectors, groups, weights, a_off, columns, b_off, rows, block, j - q0, TILE,
                        fix_starts[panel + 1] - fix_starts[panel], fix_units, fix_taps, fix_starts[panel],
                    )  # fmt: skip
                else:
                    dot_s16(vectors, groups, weights, a_off, columns, b_off, rows, block, j - q0, TILE)
            finish_panel(
                block, runs, count, panel, bias, multiplier, y_scale, zero_point, lo, hi,
                float_output, kind, act, out, residual, conv_first, add, codes,
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
    residual: np.ndarray,
    conv_first: bool,
    add: tuple,
    codes: np.ndarray,
) -> None:
    """The epilogue of one panel's tile: bias, multiplier, activation, rounding, zero point and
    saturation, stored run by run; with a residual, its Add with the shortcut's run is stored: in
    the requantising loop where there is no activation or ReLU, else after it, from ``codes`` (TILE
    8-bit values)."""
    channels = out.shape[0]
    # none or ReLU: requantized's steps without a branch, its clamps merged (floor >= -LIMIT)
    floor = np.float32(0.0) if kind == 1 else -ROUNDING_LIMIT
    zp, least, most = np.float32(zero_point), np.float32(lo), np.float32(hi)
    for r in range(min(ROWS, channels - panel * ROWS)):
        m = panel * ROWS + r
        b = bias[m]
        scale = multiplier[m]
        target = out[m]
        for i in range(count):
            at, stored, to = r * TILE + runs[0, i], runs[1, i], runs[2, i]
            # slices, not offset indices: indices the compiler knows are >= 0 let the loops vectorise;
            # the bias added in int32, as the sums are kept (int64 sums convert at half the width)
            sums = block[at : at + stored]
            final = target[to : to + stored]
            dest = codes[:stored] if residual.shape[0] else final
            if residual.shape[0] and kind <= 1 and not float_output:
                # none or ReLU with the residual Add: the code stays in a register for the Add
                other = residual[m, to : to + stored]
                ratio_a, ratio_b, fixed, least_sum, most_sum = add
                for p in range(stored):
                    v = min(max(np.float32(np.int32(sums[p] + b)) * scale, floor), ROUNDING_LIMIT)
                    q = min(max(((v + ROUNDING) - ROUNDING) + zp, least), most)
                    s = np.float32(other[p])
                    first, second = (q, s) if conv_first else (s, q)
                    final[p] = added(first, second, ratio_a, ratio_b, fixed, least_sum, most_sum)
                continue
            if kind <= 1 and not float_output:
                for p in range(stored):
                    v = min(max(np.float32(np.int32(sums[p] + b)) * scale, floor), ROUNDING_LIMIT)
                    dest[p] = min(max(((v + ROUNDING) - ROUNDING) + zp, least), most)
            else:  # float output, Clip (ReLU6 from compress's quantizer) and the rest
                finish_row(sums, b, scale, y_scale, zero_point, lo, hi, float_output, kind, act, dest)
            if residual.shape[0]:
                other = residual[m, to : to + stored]
                ratio_a, ratio_b, fixed, least_sum, most_sum = add
                if conv_first:
                    add_span(dest, other, ratio_a, ratio_b, fixed, least_sum, most_sum, final, 0, stored)
                else:
                    add_span(other, dest, ratio_a, ratio_b, fixed, least_sum, most_sum, final, 0, stored)
