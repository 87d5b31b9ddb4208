"""The cyclic garbage collector paused while a graph is optimised or planned.

Loading and planning allocate a few small objects per node (copies of nodes, types, steps,
actions) that all stay alive; each full collection walks every one of them, so with the collector
running, a 40,000-node graph spent more time in it than in planning, growing faster than the graph.
Nothing built there forms garbage cycles worth collecting midway: they are collected once the
collector runs again."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_state = {"depth": 0, "was_enabled": True}  # open blocks; whether the first found it enabled


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block (nested and concurrent blocks allowed): the collector
    is enabled again when the last block ends, if it was enabled when the first began."""
    with _lock:
        if _state["depth"] == 0:
            _state["was_enabled"] = gc.isenabled()
            gc.disable()
        _state["depth"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["depth"] -= 1
            if _state["depth"] == 0 and _state["was_enabled"]:
                gc.enable()
