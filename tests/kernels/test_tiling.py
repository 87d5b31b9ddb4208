"""Tile planning (kernels/cpu/tiling.py): how the weights' size widens im2col tiles."""

from __future__ import annotations

import math

from edgecnn.kernels.cpu import tiling


def test_large_weights_widen_the_tiles() -> None:
    """128->128 3x3 stride 2 at 28x28: 576 KiB of weights, 3.4 MiB of columns. Cache-sized tiles
    would pack the weights four times; within REPACK_RATIO x the weights, one tile per thread."""
    depth, rows, columns = 128 * 9, 128, 28 * 28
    weight_bytes = 4 * rows * depth
    small = tiling.plan_tiles(1, rows, columns, depth, 1, limit_columns=True)
    assert small.tasks == math.ceil(4 * depth * columns / tiling.COLUMNS_BYTES)
    wide = tiling.plan_tiles(1, rows, columns, depth, 1, limit_columns=True, weight_bytes=weight_bytes)
    assert wide.tasks == 1 and wide.column_step == columns
    two = tiling.plan_tiles(1, rows, columns, depth, 2, limit_columns=True, weight_bytes=weight_bytes)
    assert two.tasks == 2 and two.workers == 2


def test_small_weights_keep_cache_sized_tiles() -> None:
    """tiny-YOLO's first layer (3->16, 448x448): 1.7 KiB of weights; the columns stay in 1 MiB tiles."""
    depth, rows, columns = 27, 16, 448 * 448
    plain = tiling.plan_tiles(1, rows, columns, depth, 2, limit_columns=True)
    weighted = tiling.plan_tiles(
        1, rows, columns, depth, 2, limit_columns=True, weight_bytes=4 * rows * depth
    )
    assert weighted == plain
    assert 4 * depth * plain.column_step <= tiling.COLUMNS_BYTES
