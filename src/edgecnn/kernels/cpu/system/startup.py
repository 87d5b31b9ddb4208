"""The CPU runtime's one explicit start-up: ``initialize_cpu_runtime``, called by the first CPU plan.

Importing edgecnn changes nothing in the process; what the compiled kernels need from it happens
here, once, before numba starts its thread pool (the first parallel kernel, or the first run):

- load the ``tbb`` wheel's runtime library, so that numba's pool runs on TBB rather than OpenMP:
  a TBB region costs a few microseconds where one whose OpenMP worker sleeps costs ~20, and TBB's
  idle workers yield their core instead of spinning on it;
- set ``OMP_WAIT_POLICY=PASSIVE`` (unless the user set it or ``GOMP_SPINCOUNT``), for when the pool
  runs on OpenMP: a spinning worker takes the core another process or the next region needs;
- decide whether the pool's workers are bound to cores of their own (affinity.py);
- log a notice when kernels are compiled rather than loaded from numba's cache (compile_notice.py).

Kernels work without it, only on numba's default layer and unbound workers.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import re
import threading

from edgecnn.kernels.cpu.system import affinity, compile_notice

_TBB_FILE = re.compile(r"^(lib)?tbb(\.so\.12|\.12\.dylib|12\.dll)$")

_lock = threading.Lock()
_initialized = False
_tbb_library: str | None = None


def initialize_cpu_runtime(bind_threads: bool = True) -> None:
    """Prepare the process for the compiled kernels (see the module docstring); idempotent and
    thread-safe. The first call decides: later calls, whatever ``bind_threads``, change nothing.
    If numba's pool has already started, only the compile notice is installed: its threading
    layer and workers are fixed by then."""
    global _initialized, _tbb_library
    if _initialized:
        return
    with _lock:
        if _initialized:
            return
        if not _pool_started():
            _tbb_library = _load_tbb()
            if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
                os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # read by OpenMP when the pool starts
            affinity.enable_binding(bind_threads)
        compile_notice.install()
        _initialized = True


def tbb_library() -> str | None:
    """The TBB runtime ``initialize_cpu_runtime`` loaded for numba's pool (None: none loaded)."""
    return _tbb_library


def _pool_started() -> bool:
    """Whether numba's thread pool has been launched (its threading layer is then fixed)."""
    from numba.np.ufunc import parallel

    return bool(getattr(parallel, "_is_initialized", False))


def _load_tbb() -> str | None:
    """Load the ``tbb`` wheel's runtime library so that numba's TBB threading layer finds it.

    Numba prefers TBB to OpenMP when it can load it, but pip puts the library in the environment's
    lib directory, outside the loader's search path. Returns the path loaded, or None (no tbb
    package, or NUMBA_THREADING_LAYER names another layer): numba then runs on OpenMP."""
    if os.environ.get("NUMBA_THREADING_LAYER", "default") not in ("default", "tbb", "safe", "threadsafe"):
        return None
    try:
        files = importlib.metadata.files("tbb") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if _TBB_FILE.match(file.name):
            path = str(file.locate())
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                return None
            return path
    return None
