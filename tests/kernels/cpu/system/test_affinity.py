"""Numba's pool workers bound to cores of their own (kernels/cpu/system/affinity.py)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

from edgecnn.kernels.cpu.system import affinity

_PROBE = """
import json, os
import numpy as np
from edgecnn.kernels.cpu.system import affinity, startup, threads
startup.initialize_cpu_runtime(bind_threads={bind})
with threads.cpu_threads(2):
    pass
seen = {
    "bound": {str(t): c for t, c in affinity.bound.items()},
    "masks": {str(t): sorted(os.sched_getaffinity(t)) for t in affinity.thread_ids()},
    "main": sorted(os.sched_getaffinity(0)),
}
for tid in affinity.bound:  # another library resets every thread's affinity (as ncnn does)
    os.sched_setaffinity(tid, os.sched_getaffinity(0))
with threads.cpu_threads(1):  # a one-thread run leaves the workers as they are
    pass
seen["after one-thread run"] = {str(t): sorted(os.sched_getaffinity(t)) for t in affinity.bound}
with threads.cpu_threads(2):  # the next run on two threads binds them again
    pass
seen["after two-thread run"] = {str(t): sorted(os.sched_getaffinity(t)) for t in affinity.bound}
print(json.dumps(seen))
"""

needs_two_cores = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="binding needs Linux and at least two cores the process may use",
)


def _fresh_pool(layer: str, bind: bool) -> dict:
    """What a fresh interpreter bound when its first run started numba's pool (2 threads)."""
    env = {**os.environ, "NUMBA_THREADING_LAYER": layer, "NUMBA_NUM_THREADS": "2"}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.replace("{bind}", str(bind))],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


@needs_two_cores
@pytest.mark.parametrize("layer", ["tbb", "omp"])
def test_the_worker_gets_a_core_of_its_own(layer: str) -> None:
    if layer == "tbb" and not _has_tbb():
        pytest.skip("the tbb package is not installed here")
    seen = _fresh_pool(layer, True)
    cores = seen["main"]
    assert len(seen["bound"]) == 1  # two threads: the caller and one worker
    (tid, core), = seen["bound"].items()  # fmt: skip
    assert core == cores[-1] and seen["masks"][tid] == [core]
    assert seen["main"] == cores  # the calling thread is left free
    assert seen["after one-thread run"] == {tid: cores}
    assert seen["after two-thread run"] == {tid: [core]}


@needs_two_cores
def test_binding_can_be_turned_off() -> None:
    seen = _fresh_pool("omp", False)
    assert seen["bound"] == {}
    assert all(mask == seen["main"] for mask in seen["masks"].values())


def test_no_binding_without_spare_cores() -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    assert affinity.bind_workers(set(range(10**9, 10**9 + cores))) == {}
    assert affinity.bind_workers(set()) == {}


def _has_tbb() -> bool:
    try:
        importlib.metadata.version("tbb")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="binding needs Linux")
def test_keep_bound_forgets_a_worker_that_ended() -> None:
    ended = 2**31 - 7  # no such thread
    affinity.bound[ended] = 0
    try:
        affinity.keep_bound()
        assert ended not in affinity.bound
    finally:
        affinity.bound.pop(ended, None)
