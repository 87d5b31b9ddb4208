"""Compiled CPU kernels (numba), registered for the "cpu" backend when this package is imported.
Each is tested against the op's numpy reference kernel (tests/kernels/).

Entry points called from Python are compiled with ``nogil=True``: the batch-split runner
(runtime/batch.py) calls them from several Python threads at once, which the GIL would serialise.

Runs should be wrapped in ``cpu_threads(options.threads)`` (threads.py): it gives numba's pool the
model's thread budget and holds BLAS to one thread, since the GEMMs run on numba's threads.

Developing: numba's on-disk cache (``__pycache__/*.nbi, *.nbc``) is invalidated only when the file
defining a compiled function changes, not when a helper it calls (``activate``, ``gemm_into``...)
changes in another file; delete those cache files after editing a helper.
"""

from edgecnn.kernels.cpu import (  # noqa: F401  (importing registers them)
    conv,
    dense,
    eltwise,
    int8,
    lrn,
    pool,
    rowstable,
    sparse,
    winograd,
)
from edgecnn.kernels.cpu.threads import cpu_threads

__all__ = ["cpu_threads"]
