"""One thread pool for the compiled kernels (issue 4: no oversubscription).

Numba's pool runs every parallel kernel; GEMMs are called from its threads, tile by tile, with the
BLAS library held to one thread (blas.py). Two pools that spin-wait on the same cores — numba's
OpenMP workers and OpenBLAS's — slow each other down several-fold on a 2-core machine.

``cpu_threads(n)`` sets that budget for the duration of a run (the executor wraps each run in it).
Kernels whose work is below a grain run on one thread: waking a second thread costs more than it
saves (thresholds measured with benchmarks/kernels.py).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numba

if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    # Numba's OpenMP workers sleep between parallel regions instead of spinning: a spinning worker
    # takes the core that the other thread of the next region (or another process) needs, and
    # that costs a scheduler time slice (milliseconds) whenever the CPU is not entirely ours.
    # Read by the OpenMP runtime when numba first starts its pool, i.e. after this import.
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

GRAIN = 200_000
"""Elements a compiled loop touches (outputs x taps, roughly) below which it stays on one thread."""

GEMM_GRAIN = 1 << 20
"""Multiply-adds below which a GEMM-based kernel stays on one thread (BLAS does ~8 per loop element)."""

_blas_lock = threading.Lock()
_blas_libraries: list[Any] | None = None


def _blas() -> list[Any]:
    """The BLAS libraries loaded in this process (found once; numpy has loaded its BLAS by now)."""
    global _blas_libraries
    if _blas_libraries is None:
        with _blas_lock:
            if _blas_libraries is None:
                from threadpoolctl import ThreadpoolController

                controller = ThreadpoolController()
                _blas_libraries = [lib for lib in controller.lib_controllers if lib.user_api == "blas"]
    return _blas_libraries


def max_threads() -> int:
    """The most threads numba's pool can run (NUMBA_NUM_THREADS, fixed at start-up)."""
    return int(numba.config.NUMBA_NUM_THREADS)


def blas_threads() -> int:
    """Threads the BLAS pool uses now (the largest, if several BLAS libraries are loaded)."""
    return max((lib.get_num_threads() or 1 for lib in _blas()), default=1)


def set_blas_threads(n: int) -> None:
    global _held_blas
    for lib in _blas():
        if lib.get_num_threads() != n:
            lib.set_num_threads(n)
    if _holders:
        _held_blas = n  # what a hold's blas_single_threaded() will find


_hold_lock = threading.Lock()
_holders = 0  # runs (and direct kernel calls) under way that need BLAS held
_saved_blas = 1  # the BLAS thread count before the first of them
_held_blas = 0  # the BLAS thread count the holders set (0: no holder)


@contextmanager
def _hold_blas(n: int) -> Iterator[None]:
    """BLAS at ``n`` threads while any holder runs; the count before the first holder comes back
    when the last one leaves. BLAS's setting is process-wide: with concurrent runs, restoring it
    when one run ends would change it under the others (and with it their GEMMs' rounding)."""
    global _holders, _saved_blas, _held_blas
    with _hold_lock:
        if _holders == 0:
            _saved_blas = blas_threads()
        _holders += 1
        if _held_blas != n:  # threadpoolctl's queries cost microseconds: only when it changes
            set_blas_threads(n)
            _held_blas = n
    try:
        yield
    finally:
        with _hold_lock:
            _holders -= 1
            if _holders == 0:
                set_blas_threads(_saved_blas)
                _held_blas = 0


@contextmanager
def blas_single_threaded() -> Iterator[None]:
    """BLAS on the calling thread only, for GEMMs called from numba's workers (restored after)."""
    if _held_blas == 1:  # as inside every run (cpu_threads holds BLAS at one thread)
        yield
        return
    previous = blas_threads()
    if previous == 1:
        yield
        return
    set_blas_threads(1)
    try:
        yield
    finally:
        set_blas_threads(previous)


@contextmanager
def cpu_threads(n: int) -> Iterator[None]:
    """Run with ``n`` threads: numba's pool (for the calling thread) gets them, BLAS one (our GEMMs
    run on numba's threads), or ``n`` where the compiled kernels cannot call BLAS themselves.

    Restores both afterwards. Numba's setting is per calling thread; BLAS's is process-wide and
    held until the last concurrent run ends (with different budgets, the last one set applies).
    """
    if n < 1:
        raise ValueError(f"threads must be >= 1, got {n}")
    from edgecnn.kernels.cpu import blas

    previous_numba = _get_threads()
    _set_threads(min(n, max_threads()))
    try:
        with _hold_blas(1 if blas.AVAILABLE else n):
            yield
    finally:
        _set_threads(previous_numba)


def is_small(work: int) -> bool:
    """Whether a compiled loop over ``work`` elements should stay on one thread."""
    return work < GRAIN


def _thread_api() -> tuple[Callable[[], int], Callable[[int], None]]:
    """Getter and setter of the calling thread's numba thread count, as cheap as they can be.

    ``numba.get_num_threads``/``set_num_threads`` take two locks and re-check the pool's start-up
    on every call (about 4 us each, 15+ calls per run of a small model); once the pool runs, the
    threading layer's own functions underneath them do the same job. Falls back to the public
    functions if this numba version lays them out differently."""
    from numba.np.ufunc import parallel

    numba.get_num_threads()  # starts the pool: the layer's functions exist from here on
    getter = getattr(parallel, "_get_num_threads", None)
    setter = getattr(parallel, "_set_num_threads", None)
    if callable(getter) and callable(setter) and getter() == numba.get_num_threads():
        return getter, setter
    return numba.get_num_threads, numba.set_num_threads


def _first_get() -> int:
    """Starts numba's pool on first use (not at import) and installs the fast functions."""
    global _get_threads, _set_threads
    _get_threads, _set_threads = _thread_api()
    return _get_threads()


def _first_set(n: int) -> None:
    _first_get()
    _set_threads(n)


_get_threads: Callable[[], int] = _first_get
_set_threads: Callable[[int], None] = _first_set


def current_threads() -> int:
    """The calling thread's numba thread count (what a kernel may split its work into)."""
    return _get_threads()


def call(kernel: Callable[..., Any], small: bool, *args: Any) -> Any:
    """``kernel(*args)``, on one numba thread if ``small``.

    The switch happens here, in Python, because a compiled function that sets numba's thread count
    itself cannot be written to the on-disk cache. ``n`` is always 1 here, inside the pool's range.
    """
    if not small:
        return kernel(*args)
    previous = _get_threads()
    if previous == 1:
        return kernel(*args)
    _set_threads(1)
    try:
        return kernel(*args)
    finally:
        _set_threads(previous)
