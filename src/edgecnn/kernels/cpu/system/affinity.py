"""Numba's pool workers bound to cores of their own (the threads bound to cores of seed 003).

Why: once the calling thread has slept (a camera pipeline waiting for its next frame, `edgecnn
bench` pausing between runs), Linux may wake it on the core where the pool's worker sleeps. The
worker, woken by the next parallel region, then shares that core with it until the load balancer
moves one of them, milliseconds later. A worker bound to a core the calling thread does not start
on has its core to itself the moment it wakes.

The workers go to the last cores the process may use, one each; the calling thread (the user's, not
ours to bind) keeps every core and settles on the first ones. Nothing is bound where there are at
least as many workers as cores, off Linux, or unless ``startup.initialize_cpu_runtime`` asked for
binding before the pool started (``RuntimeOptions.bind_threads``, ``EDGECNN_BIND_THREADS=0``: no).

Other libraries in the process may reset every thread's affinity (ncnn does, when it loads or runs
a model): each run on more than one thread checks the workers first (``keep_bound``) and binds
again any that were moved.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np

_binding = False  # whether start_pool_bound binds the workers (enable_binding)

_TASKS = Path("/proc/self/task")

bound: dict[int, int] = {}
"""Native thread id -> core of each worker bound (empty: none)."""


def thread_ids() -> set[int]:
    """The process's native thread ids (empty where /proc does not list them)."""
    try:
        return {int(name) for name in os.listdir(_TASKS)}
    except OSError:
        return set()


@numba.njit(parallel=True, nogil=True, cache=True)
def _touch(flags: np.ndarray) -> None:
    """One trivial parallel region: OpenMP creates its workers at the first one (TBB at start-up)."""
    for i in numba.prange(flags.shape[0]):
        flags[i] = 1


def bind_workers(workers: set[int]) -> dict[int, int]:
    """Bind each of ``workers`` (native thread ids) to one of the last cores the process may use;
    returns what was bound (nothing where the workers are not fewer than the cores)."""
    if not hasattr(os, "sched_setaffinity"):
        return {}
    cores = sorted(os.sched_getaffinity(0))
    if not workers or len(workers) >= len(cores):
        return {}
    done: dict[int, int] = {}
    for tid, core in zip(sorted(workers), reversed(cores)):
        try:
            os.sched_setaffinity(tid, {core})
        except OSError:  # the thread ended, or binding is not allowed here: leave it free
            continue
        done[tid] = core
    return done


def enable_binding(on: bool) -> None:
    """Whether ``start_pool_bound`` binds the workers it starts (startup.initialize_cpu_runtime
    sets it before the pool starts; afterwards it changes nothing)."""
    global _binding
    _binding = on


def start_pool_bound(start: Callable[[], int]) -> int:
    """Start numba's pool with ``start`` (returns its thread count) and, where binding is enabled, bind the
    threads it created to cores."""
    before = thread_ids()
    threads = start()
    if not _binding or not before:
        return threads
    _touch(np.zeros(threads, dtype=np.uint8))
    bound.update(bind_workers(thread_ids() - before))
    return threads


def keep_bound() -> None:
    """Bind again each worker whose core another library has changed since (one system call per
    worker when nothing changed); a worker that has ended, or whose core the process may no longer
    use, is left alone from then on."""
    for tid, core in list(bound.items()):
        try:
            if os.sched_getaffinity(tid) != {core}:
                os.sched_setaffinity(tid, {core})
        except OSError:
            bound.pop(tid, None)
