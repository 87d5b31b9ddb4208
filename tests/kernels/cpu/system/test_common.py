"""The per-thread scratch buffers every compiled kernel borrows (kernels/cpu/system/common.py)."""

from __future__ import annotations

import threading

import numpy as np

from edgecnn.kernels.cpu.system.common import scratch, worker_scratch


def test_worker_rows_keep_their_addresses_from_call_to_call() -> None:
    """Row w starts at the same address whatever the layer asks for, as long as it fits: the point
    of the per-worker rows (a worker keeps writing lines its own core wrote last)."""
    first = worker_scratch(2, 1000)
    starts = [row.ctypes.data for row in first]
    for size in (10, 999, 1000, 3):
        again = worker_scratch(2, size)
        assert [row.ctypes.data for row in again] == starts
        assert again.shape[1] >= size and again.flags.c_contiguous


def test_worker_rows_grow_to_the_largest_request_and_never_overlap() -> None:
    small = worker_scratch(1, 16)
    grown = worker_scratch(3, 5000)
    assert grown.shape[0] == 3 and grown.shape[1] >= 5000
    assert not np.shares_memory(grown[0], grown[1]) and not np.shares_memory(grown[1], grown[2])
    assert worker_scratch(2, 4000).shape[1] >= 5000  # a smaller request keeps the larger rows
    assert small.dtype == np.float32


def test_worker_rows_are_apart_from_the_shared_scratch_and_per_thread() -> None:
    rows = worker_scratch(2, 256)
    assert not np.shares_memory(rows, scratch(4096))
    other: list[np.ndarray] = []
    thread = threading.Thread(target=lambda: other.append(worker_scratch(2, 256)))
    thread.start()
    thread.join()
    assert not np.shares_memory(rows, other[0])
