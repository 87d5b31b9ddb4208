"""The thread budget (cpu_threads, small work on one thread) and the tiling of GEMM layers."""

from __future__ import annotations

import importlib.metadata
import math
import os
import subprocess
import sys

import numba
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgecnn.kernels.cpu.gemm.tiling import plan_tiles
from edgecnn.kernels.cpu.system import blas, threads
from edgecnn.kernels.cpu.tuning_record import DEFAULT_CPU_TUNING


def test_cpu_threads_sets_one_pool_and_restores() -> None:
    before_numba, before_blas = numba.get_num_threads(), threads.blas_threads()
    with threads.cpu_threads(1):
        assert numba.get_num_threads() == 1
        assert threads.blas_threads() == 1
    with threads.cpu_threads(64):  # more than numba's pool has: capped, no error
        assert numba.get_num_threads() == threads.max_threads()
        assert threads.blas_threads() == (1 if blas.AVAILABLE else 64)
    assert (numba.get_num_threads(), threads.blas_threads()) == (before_numba, before_blas)


def test_cpu_threads_rejects_zero() -> None:
    with pytest.raises(ValueError, match="threads must be >= 1"), threads.cpu_threads(0):
        pass


def test_small_work_runs_on_one_thread_and_restores() -> None:
    seen = []
    with threads.cpu_threads(2):
        threads.call(lambda: seen.append(numba.get_num_threads()), True)
        threads.call(lambda: seen.append(numba.get_num_threads()), False)
        after = numba.get_num_threads()
    assert seen == [1, min(2, threads.max_threads())] and after == min(2, threads.max_threads())
    assert threads.is_small(DEFAULT_CPU_TUNING.grain - 1) and not threads.is_small(DEFAULT_CPU_TUNING.grain)


def test_blas_single_threaded_restores() -> None:
    with threads.cpu_threads(2):
        threads.set_blas_threads(2)
        with threads.blas_single_threaded():
            assert threads.blas_threads() == 1
        assert threads.blas_threads() == 2


@given(
    outer=st.integers(1, 8),
    rows=st.integers(1, 600),
    columns=st.integers(1, 5000),
    depth=st.integers(1, 5000),
    thread_count=st.integers(1, 8),
    limit=st.booleans(),
)
def test_tiles_cover_the_output(
    outer: int, rows: int, columns: int, depth: int, thread_count: int, limit: bool
) -> None:
    tiling = plan_tiles(outer, rows, columns, depth, thread_count, limit_columns=limit)
    row_tiles = math.ceil(rows / tiling.row_step)
    column_tiles = math.ceil(columns / tiling.column_step)
    assert tiling.row_step >= 1 and tiling.column_step >= 1
    assert (row_tiles - 1) * tiling.row_step < rows and (column_tiles - 1) * tiling.column_step < columns
    assert tiling.tasks == outer * row_tiles * column_tiles
    assert 1 <= tiling.workers <= min(thread_count, tiling.tasks)
    if thread_count > 1 and rows * columns >= 64 * thread_count * 16:
        assert tiling.tasks >= thread_count  # every thread gets work on a layer of any size


def test_results_do_not_depend_on_threads() -> None:
    from edgecnn.ops.conv import ConvAttrs
    from kernels.support import fast_run

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 8, 33, 35), dtype=np.float32)
    w = rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
    attrs = ConvAttrs(pads=(1, 1, 1, 1))
    one, _ = fast_run("Conv", attrs, [x, w], (1,), 1)
    two, _ = fast_run("Conv", attrs, [x, w], (1,), 2)
    np.testing.assert_allclose(one, two, rtol=1e-5, atol=1e-5)


_LAYER_PROBE = """
import numba
from edgecnn.kernels.cpu.system import startup, threads
startup.initialize_cpu_runtime()
threads.current_threads()
print(numba.threading_layer(), startup.tbb_library() is not None)
"""


def _pool_layer(environment: dict[str, str]) -> list[str]:
    """numba's threading layer and whether TBB was loaded, in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    env.update(environment)
    result = subprocess.run(
        [sys.executable, "-c", _LAYER_PROBE], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.split()


def test_pool_runs_on_tbb_where_the_package_is_installed() -> None:
    try:
        importlib.metadata.version("tbb")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the tbb package is not installed here (a dependency on x86-64 only)")
    assert _pool_layer({}) == ["tbb", "True"]


def test_a_chosen_threading_layer_is_left_alone() -> None:
    assert _pool_layer({"NUMBA_THREADING_LAYER": "omp"}) == ["omp", "False"]
