"""A notice on stderr when edgecnn's CPU kernels are being compiled.

Why: the first inference after installing or upgrading edgecnn compiles the kernels a model needs,
which takes a few minutes on a small CPU (docs/startup.md, the cold row). Later processes load
them from numba's on-disk cache in about a second. Without a word, that first run looks like a
hang. numba announces every compilation it cannot serve from its cache (its ``numba:compile``
event), so the first one of an edgecnn function logs one warning on the ``edgecnn`` logger. Python
prints it on stderr unless the application configures logging, and the application can silence it
there. Nothing is logged when the cache serves every kernel.
"""

from __future__ import annotations

import logging
import threading

from numba.core import event

LOG = logging.getLogger("edgecnn")

MESSAGE = (
    "compiling edgecnn's CPU kernels for this machine: the first run after installing or upgrading "
    "edgecnn takes a few minutes; the compiled code is cached on disk, so later processes start "
    "in about a second"
)


class _FirstCompile(event.Listener):
    """Logs MESSAGE at the first compilation of a function from an edgecnn module."""

    def __init__(self) -> None:
        self.told = False
        self._lock = threading.Lock()

    def on_start(self, ev: event.Event) -> None:
        if self.told:
            return
        data = ev.data if isinstance(ev.data, dict) else {}
        function = getattr(data.get("dispatcher"), "py_func", None)
        if not str(getattr(function, "__module__", "")).startswith("edgecnn."):
            return
        with self._lock:
            if self.told:
                return
            self.told = True
        LOG.warning(MESSAGE)

    def on_end(self, ev: event.Event) -> None:
        pass


_listener: _FirstCompile | None = None


def install() -> None:
    """Listen for numba's compilations (once per process)."""
    global _listener
    if _listener is None:
        _listener = _FirstCompile()
        event.register("numba:compile", _listener)
