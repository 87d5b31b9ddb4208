"""Compiled CPU kernels (numba) for the "cpu" backend. Each is tested against the op's numpy
reference kernel (tests/kernels/).

Which kernels each op family has, and in which order they are tried, is one table:
``FAMILIES`` in selection.py. Kernel modules are imported lazily: importing this package only
declares, in ``KERNEL_MODULES`` (derived from that table), which module registers kernels for which
ops; the registry imports a module the first time a node of one of its ops is planned. A model
without LRN or int8 layers never imports (or loads from numba's cache) those kernels, which keeps
the first inference of a fresh process short (issue 4). To add a kernel: list it in its family in
selection.py and register it in its module with ``register(name, factory, when=...)``
(tests/kernels/cpu/test_lazy_registration.py checks that the table and the registrations agree).

Entry points called from Python are compiled with ``nogil=True``: the batch-split runner
(runtime/batch.py) calls them from several Python threads at once, which the GIL would serialise.

Importing this package changes nothing in the process beyond importing numba's array functions
(numba_start.py, as numba itself would, without SciPy) and the cache locators of edgecnn's own
compiled functions (below). ``initialize_cpu_runtime(bind_threads)``
(system/startup.py) is the one explicit start-up: TBB for numba's pool, OpenMP's wait policy,
workers bound to cores, the compile notice; the first CPU plan calls it, before any kernel runs.

Runs should be wrapped in ``cpu_threads(options.threads)`` (system/threads.py): it gives numba's pool the
model's thread budget and holds BLAS to one thread, since the GEMMs run on numba's threads.

numba's on-disk cache (``__pycache__/*.nbi, *.nbc``) would be invalidated only when the file
defining a compiled function changes, not when a helper it inlines (``activate``, ``gemm_into``...)
changes in another file; ``kernel_cache.install`` (system/kernel_cache.py), called here before any
kernel module is imported, stamps the kernels' cache entries with their compiled imports too.
"""

from edgecnn.kernels.cpu.system import kernel_cache
from edgecnn.kernels.cpu.system.numba_start import import_arraymath_deferring_scipy

kernel_cache.install()  # before any kernel is decorated: numba picks a function's locator then
import_arraymath_deferring_scipy()  # before anything compiles or loads a kernel

from edgecnn.kernels.cpu.selection import kernel_modules  # noqa: E402
from edgecnn.kernels.cpu.system.startup import initialize_cpu_runtime  # noqa: E402
from edgecnn.kernels.cpu.system.threads import cpu_threads  # noqa: E402
from edgecnn.kernels.registry import register_module  # noqa: E402

KERNEL_MODULES: dict[str, tuple[str, ...]] = kernel_modules()
"""Kernel module (in this package) -> the ops it registers kernels for, from selection.py's table."""

for _module, _ops in KERNEL_MODULES.items():
    register_module(f"{__name__}.{_module}", _ops)

__all__ = ["KERNEL_MODULES", "cpu_threads", "initialize_cpu_runtime"]
