"""How a GEMM-shaped layer is cut into per-thread tiles (conv/tiled_gemm.py, gemm/dense_tiles.py).

Rules, in order: a tile's im2col columns stay within COLUMNS_BYTES (about a core's L2); there are at least
as many tiles as threads, and their count is a multiple of the threads where that costs little
(static scheduling: unequal shares leave a core idle); the pixel (column) dimension is cut before
the channel (row) dimension, because cutting rows repeats the im2col work — except where the caller
asks for rows first (``rows_first``: a 1x1 layer with more output channels than pixels, see
``prefer_rows``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

COLUMNS_BYTES = 1 << 20
"""Target size of one tile's im2col columns: twice a 512 KiB L2, since wider tiles make wider (more
efficient) GEMMs."""

REPACK_RATIO = 8
"""A tile's im2col columns may grow to this many times the layer's weights (beyond COLUMNS_BYTES):
every tile's GEMM packs the whole weight matrix again, which costs more than columns that spill
from L2 once the weights are large."""

MIN_COLUMNS = 64
"""Narrowest tile worth a GEMM call (a few of the BLAS micro-kernel's column blocks)."""

MIN_ROWS = 16


@dataclass(frozen=True)
class Tiling:
    row_step: int  # output channels (or dense rows) per tile
    column_step: int  # output pixels (or dense columns) per tile
    tasks: int
    workers: int  # tiles processed side by side, each with its own columns buffer


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def plan_tiles(
    outer: int,
    rows: int,
    columns: int,
    depth: int,
    threads: int,
    *,
    limit_columns: bool,
    weight_bytes: int = 0,
    rows_first: bool = False,
) -> Tiling:
    """Tiles for ``outer`` independent (rows x depth) @ (depth x columns) products (images x groups).

    ``limit_columns`` bounds a tile's width so its (depth x width) im2col buffer stays in cache, or
    within REPACK_RATIO times ``weight_bytes`` (the weights every tile's GEMM packs) if that is more.
    ``rows_first`` cuts the rows (in equal, 16-aligned shares) before the columns when the products
    are fewer than the threads and every share keeps MIN_ROWS rows.
    """
    if rows_first and not limit_columns and threads > 1 and outer < threads:
        row_tiles = math.ceil(threads / outer)
        if rows // row_tiles >= MIN_ROWS:
            row_step = math.ceil(rows / row_tiles)
            aligned = _round_up(row_step, 16)
            if math.ceil(rows / aligned) == row_tiles:
                row_step = aligned
            tasks = outer * math.ceil(rows / row_step)
            return Tiling(row_step, columns, tasks, max(1, min(threads, tasks)))
    column_step = columns
    if limit_columns:
        budget = max(COLUMNS_BYTES, REPACK_RATIO * weight_bytes)
        column_step = min(columns, max(MIN_COLUMNS, budget // (4 * max(depth, 1))))
    column_tiles = math.ceil(columns / column_step)
    row_tiles = 1
    per_product = math.ceil(threads / outer)  # tiles each product needs for every thread to get one
    if column_tiles < per_product:
        if columns // per_product >= MIN_COLUMNS or rows // per_product < MIN_ROWS:
            column_tiles = min(columns, per_product)
        else:
            row_tiles = min(rows, math.ceil(per_product / column_tiles))
    total = outer * row_tiles * column_tiles
    if threads > 1 and total % threads and total > threads:
        balanced = _round_up(total, threads) // (outer * row_tiles)
        if balanced <= columns and columns / balanced >= MIN_COLUMNS / 2:
            column_tiles = balanced
    column_step = math.ceil(columns / column_tiles)
    aligned = _round_up(column_step, 16)  # whole SIMD blocks per tile, where the tile count allows
    if column_tiles > 1 and math.ceil(columns / aligned) == column_tiles:
        column_step = aligned
    column_tiles = math.ceil(columns / column_step)
    row_step = math.ceil(rows / row_tiles)
    row_tiles = math.ceil(rows / row_step)
    tasks = outer * row_tiles * column_tiles
    return Tiling(row_step, column_step, tasks, max(1, min(threads, tasks)))


def prefer_rows(rows: int, columns: int, *, im2col: bool) -> bool:
    """Whether a layer's tiles should cut the rows (output channels) before the columns (pixels).

    Every tile's sgemm packs its whole share of both operands: cutting the columns makes each thread
    pack all of the weights (rows x depth), cutting the rows makes each pack all of the input
    (depth x columns). Without im2col to repeat (1x1 layers), the cheaper cut is the rows when
    rows > columns."""
    return not im2col and rows > columns
