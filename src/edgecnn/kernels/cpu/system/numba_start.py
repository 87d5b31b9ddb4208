"""Numba's target initialisation without its eager import of SciPy (issue 4: start-up).

The first time numba compiles or loads a function from its cache, it imports its numpy
implementations, among them ``numba.np.arraymath``. That module imports ``scipy.linalg`` (when
SciPy is installed) at once, only to record whether a BLAS is there for ``np.correlate`` and
``np.convolve``; with SciPy's own imports that costs a few hundred milliseconds of a fresh process
(docs/startup.md). edgecnn's kernels call numpy's BLAS directly (blas.py) and never need it.

``import_arraymath_deferring_scipy`` imports that module with ``scipy.linalg.cython_blas`` hidden,
then sets the flag to what numba's check would have found. Nothing else changes for other numba
code in the process: ``np.dot`` and friends import SciPy's BLAS bindings when they are compiled,
as they always do (tests/kernels/cpu/system/test_numba_start.py checks the flag against numba's own check).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_ARRAYMATH = "numba.np.arraymath"
_SCIPY_BLAS = "scipy.linalg.cython_blas"


def scipy_blas_installed() -> bool:
    """Whether SciPy's BLAS bindings are installed, found without importing SciPy."""
    spec = importlib.util.find_spec("scipy")
    if spec is None or not spec.submodule_search_locations:
        return False
    return any(
        any((Path(folder) / "linalg").glob("cython_blas.*")) for folder in spec.submodule_search_locations
    )


def import_arraymath_deferring_scipy() -> None:
    """Import ``numba.np.arraymath`` without the SciPy import it makes (once per process)."""
    if _ARRAYMATH in sys.modules or _SCIPY_BLAS in sys.modules:
        return
    sys.modules[_SCIPY_BLAS] = None  # type: ignore[assignment]  # import raises ImportError at once
    try:
        import numba.np.arraymath as arraymath  # _ARRAYMATH
    finally:
        del sys.modules[_SCIPY_BLAS]
    arraymath._HAVE_BLAS = scipy_blas_installed()
