"""Tile planning (kernels/cpu/gemm/tiling.py): how the weights' size widens im2col tiles."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from edgecnn.kernels.cpu.gemm import tiling


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


def test_wide_pointwise_layers_cut_rows_first() -> None:
    """SqueezeNet's 512->1000 1x1 at 13x13: two row shares (each thread packs half the weights and
    the whole 512x169 input) instead of two pixel shares (each packing all 2 MiB of weights)."""
    assert tiling.prefer_rows(1000, 169, im2col=False)
    assert not tiling.prefer_rows(1000, 169, im2col=True)  # cutting rows would repeat im2col
    assert not tiling.prefer_rows(64, 56 * 56, im2col=False)
    two = tiling.plan_tiles(1, 1000, 169, 512, 2, limit_columns=False, rows_first=True)
    assert (two.row_step, two.column_step, two.tasks, two.workers) == (512, 169, 2, 2)
    assert two == tiling.plan_tiles(1, 1000, 169, 512, 2, limit_columns=False, rows_first=True)
    by_columns = tiling.plan_tiles(1, 1000, 169, 512, 2, limit_columns=False)
    assert by_columns.row_step == 1000 and by_columns.tasks == 2


def test_rows_first_needs_rows_and_threads_to_share() -> None:
    """One thread, a batch as large as the threads, or too few rows: the column rule decides."""
    for args in ((1, 1000, 169, 512, 1), (2, 1000, 169, 512, 2), (1, 24, 10, 512, 2)):
        assert tiling.plan_tiles(*args, limit_columns=False, rows_first=True) == tiling.plan_tiles(
            *args, limit_columns=False
        )


@given(
    outer=st.integers(1, 4),
    rows=st.integers(1, 2000),
    columns=st.integers(1, 400),
    thread_count=st.integers(1, 8),
)
def test_rows_first_tiles_cover_the_output(outer: int, rows: int, columns: int, thread_count: int) -> None:
    t = tiling.plan_tiles(outer, rows, columns, 64, thread_count, limit_columns=False, rows_first=True)
    row_tiles, column_tiles = math.ceil(rows / t.row_step), math.ceil(columns / t.column_step)
    assert (row_tiles - 1) * t.row_step < rows and (column_tiles - 1) * t.column_step < columns
    assert t.tasks == outer * row_tiles * column_tiles
    assert 1 <= t.workers <= min(thread_count, t.tasks)
    if thread_count > 1 and rows >= 2 * tiling.MIN_ROWS * thread_count:
        assert t.tasks >= min(thread_count, outer * thread_count)
