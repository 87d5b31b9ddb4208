"""One thread pool for the compiled kernels (issue 4: no oversubscription).

Numba's pool runs every parallel kernel, on Intel TBB where the ``tbb`` package is installed (a
dependency, loaded by ``startup.initialize_cpu_runtime``), else on OpenMP; GEMMs are called from its
threads, tile by tile, with the BLAS library held to one thread (blas.py). Two pools that spin-wait on the same cores — numba's
OpenMP workers and OpenBLAS's — slow each other down several-fold.

``cpu_threads(n)`` sets that budget for the duration of a run (the executor wraps each run in it).
Kernels whose work is below a grain run on one thread: waking a second thread costs more than it
saves (the grains are fields of tuning_record.CpuTuning).
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numba

from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning

BlasPool = tuple[Callable[[], int], Callable[[int], None], Callable[[int], int]]
"""Getter, setter and exchanger (set, return the count before) of one BLAS library's process-wide
thread count."""

_blas_lock = threading.Lock()
_blas_pools: list[BlasPool] | None = None


def _openblas_pool(lib: Any) -> BlasPool | None:
    """OpenBLAS's own get/set functions, called through ctypes directly.

    threadpoolctl's controller methods do the same through several Python layers; every run sets
    the count and restores it, and on a cold cache (a run after other work) those layers cost tens
    of microseconds. Only for OpenBLAS's pthreads build, whose count is process-wide."""
    if getattr(lib, "internal_api", "") != "openblas" or getattr(lib, "threading_layer", "") == "openmp":
        return None
    try:
        handle = ctypes.CDLL(lib.filepath)
    except OSError:
        return None
    for prefix in ("", "scipy_"):
        for suffix in ("", "64_", "_64"):
            getter = getattr(handle, f"{prefix}openblas_get_num_threads{suffix}", None)
            setter = getattr(handle, f"{prefix}openblas_set_num_threads{suffix}", None)
            if getter is not None and setter is not None:
                getter.restype, getter.argtypes = ctypes.c_int, []
                setter.restype, setter.argtypes = None, [ctypes.c_int]
                # OpenBLAS >= 0.3.27: sets the (pthreads build: process-wide) count and returns
                # the previous one, one call where a run's start would need two
                exchanger = getattr(handle, "openblas_set_num_threads_local", None)
                if exchanger is not None:
                    exchanger.restype, exchanger.argtypes = ctypes.c_int, [ctypes.c_int]
                else:
                    exchanger = _exchange_with(getter, setter)
                return getter, setter, exchanger
    return None


def _exchange_with(get: Callable[[], int], set_threads: Callable[[int], None]) -> Callable[[int], int]:
    def exchange(n: int) -> int:
        previous = get() or 1
        if previous != n:
            set_threads(n)
        return previous

    return exchange


def _controller_pool(lib: Any) -> BlasPool:
    """Any other BLAS, through threadpoolctl's controller."""

    def get() -> int:
        return int(lib.get_num_threads() or 1)

    return get, lib.set_num_threads, _exchange_with(get, lib.set_num_threads)


def _pools() -> list[BlasPool]:
    """The BLAS libraries loaded in this process (found once; numpy has loaded its BLAS by now)."""
    global _blas_pools
    if _blas_pools is None:
        with _blas_lock:
            if _blas_pools is None:
                from threadpoolctl import ThreadpoolController

                controller = ThreadpoolController()
                libraries = [lib for lib in controller.lib_controllers if lib.user_api == "blas"]
                _blas_pools = [_openblas_pool(lib) or _controller_pool(lib) for lib in libraries]
    return _blas_pools


def max_threads() -> int:
    """The most threads numba's pool can run (NUMBA_NUM_THREADS, fixed at start-up)."""
    # set from the environment at numba's start-up, so absent from what mypy reads of numba.config
    return int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]


def blas_threads() -> int:
    """Threads the BLAS pool uses now (the largest, if several BLAS libraries are loaded)."""
    return max((pool[0]() or 1 for pool in _pools()), default=1)


def set_blas_threads(n: int) -> None:
    global _held_blas
    for get, set_threads, _ in _pools():
        if get() != n:
            set_threads(n)
    if _holders:
        _held_blas = n  # what a hold's blas_single_threaded() will find


_hold_lock = threading.Lock()
_holders = 0  # runs (and direct kernel calls) under way that need BLAS held
_saved_blas: list[int] = []  # each BLAS library's thread count before the first of them
_held_blas = 0  # the BLAS thread count the holders set (0: no holder)


def _hold_blas_enter(n: int) -> None:
    """BLAS at ``n`` threads while any holder runs; the counts before the first holder come back
    when the last one leaves (``_hold_blas_exit``). BLAS's setting is process-wide: with concurrent
    runs, restoring it when one run ends would change it under the others (and with it their
    GEMMs' rounding). One exchange and at most one set per library: every run passes here."""
    global _holders, _saved_blas, _held_blas
    with _hold_lock:
        if _holders == 0:
            _saved_blas = [exchange(n) or 1 for _, _, exchange in _pools()]
            _held_blas = n
        elif _held_blas != n:
            set_blas_threads(n)
            _held_blas = n
        _holders += 1


def _hold_blas_exit() -> None:
    global _holders, _held_blas
    with _hold_lock:
        _holders -= 1
        if _holders == 0:
            for (_, set_threads, _), saved in zip(_pools(), _saved_blas):
                if saved != _held_blas:
                    set_threads(saved)
            _held_blas = 0


@contextmanager
def _blas_switched_to_one() -> Iterator[None]:
    previous = blas_threads()
    if previous == 1:
        yield
        return
    set_blas_threads(1)
    try:
        yield
    finally:
        set_blas_threads(previous)


_ALREADY_SINGLE = contextlib.nullcontext()  # reusable: kernels enter it once per step inside a run


def blas_single_threaded() -> contextlib.AbstractContextManager[None]:
    """BLAS on the calling thread only, for GEMMs called from numba's workers (restored after)."""
    if _held_blas == 1:  # as inside every run (cpu_threads holds BLAS at one thread)
        return _ALREADY_SINGLE
    return _blas_switched_to_one()


class ThreadBudget:
    """What ``cpu_threads`` returns: a context manager as cheap as Python allows, since every run
    enters one (a generator-based one costs several microseconds, many more on a cold cache)."""

    __slots__ = ("_blas", "_numba", "_previous")

    def __init__(self, numba_threads: int, blas_count: int) -> None:
        self._numba = numba_threads
        self._blas = blas_count
        self._previous = 0

    def __enter__(self) -> None:
        self._previous = _get_threads()
        if self._previous != self._numba:
            _set_threads(self._numba)
        if self._numba > 1 and _bound:
            _keep_bound()
        try:
            _hold_blas_enter(self._blas)
        except BaseException:
            _set_threads(self._previous)
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            _hold_blas_exit()
        finally:
            if self._previous != self._numba:
                _set_threads(self._previous)


_blas_callable: bool | None = None  # blas.AVAILABLE, read once (importing blas binds the library)
_bound: dict[int, int] = {}  # affinity.bound once the pool has started (empty: runs skip the check)


def _nothing_bound() -> None:
    """Before the pool starts no worker is bound, so there is nothing to check."""


_keep_bound: Callable[[], None] = _nothing_bound  # affinity.keep_bound once the pool has started


def cpu_threads(n: int) -> ThreadBudget:
    """Run with ``n`` threads: numba's pool (for the calling thread) gets them, BLAS one (our GEMMs
    run on numba's threads), or ``n`` where the compiled kernels cannot call BLAS themselves.

    Restores both afterwards. Numba's setting is per calling thread; BLAS's is process-wide and
    held until the last concurrent run ends (with different budgets, the last one set applies).
    Not re-entrant on one object: enter each ``cpu_threads(n)`` once (``with cpu_threads(n):``).
    """
    global _blas_callable
    if n < 1:
        raise ValueError(f"threads must be >= 1, got {n}")
    if _blas_callable is None:
        from edgecnn.kernels.cpu.system import blas

        _blas_callable = blas.AVAILABLE
    return ThreadBudget(min(n, max_threads()), 1 if _blas_callable else n)


def is_small(work: int) -> bool:
    """Whether a compiled loop over ``work`` elements should stay on one thread."""
    return work < active_cpu_tuning().grain


@numba.njit(inline="always", cache=True)
def worker_share(worker: int, workers: int, tasks: int) -> tuple[int, int]:
    """Worker ``worker``'s tasks [first, end): a contiguous run, not every ``workers``-th task.

    Why: kernels order their tasks by pixels (bands of rows, runs of tiles), so a contiguous share
    is one region of the map, and the next layer's share of the same region reads mostly what its
    own core wrote, instead of lines that must cross from the other core's caches, which on some
    machines becomes several times slower for minutes at a time."""
    return worker * tasks // workers, (worker + 1) * tasks // workers


def small_conv(macs: int) -> bool:
    """Whether a GEMM-based conv layer of ``macs`` multiply-adds should stay on one thread
    (``CpuTuning.conv_gemm_grain``: waking a worker costs more than it saves below it)."""
    return macs < active_cpu_tuning().conv_gemm_grain


def _thread_api() -> tuple[Callable[[], int], Callable[[int], None]]:
    """Getter and setter of the calling thread's numba thread count, as cheap as they can be.

    ``numba.get_num_threads``/``set_num_threads`` take two locks and re-check the pool's start-up
    on every call (about 4 us each, 15+ calls per run of a small model); once the pool runs, the
    threading layer's own functions underneath them do the same job. Falls back to the public
    functions if this numba version lays them out differently."""
    from numba.np.ufunc import parallel

    from edgecnn.kernels.cpu.system import affinity

    global _bound, _keep_bound
    affinity.start_pool_bound(
        numba.get_num_threads
    )  # starts the pool: the layer's functions exist from here on
    _bound, _keep_bound = affinity.bound, affinity.keep_bound
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
