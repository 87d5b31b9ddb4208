"""Numba's target initialisation without its eager SciPy import (kernels/cpu/system/numba_start.py).

Each case runs in a fresh interpreter: the deferral only acts before numba has imported its numpy
implementations, which this test process did long ago."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _run(source: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


def test_kernels_load_without_importing_scipy_linalg():
    out = _run(
        """
        import sys
        import numpy as np
        from edgecnn.kernels.cpu.eltwise import activation  # compiled, or loaded from the cache
        x = np.linspace(-1, 1, 64, dtype=np.float32)
        out = np.empty_like(x)
        activation(x, 1, 0.0, 0.0, 0.0, 16, out)  # ReLU
        assert np.array_equal(out, np.maximum(x, 0))
        print("scipy.linalg" in sys.modules)
        """
    )
    assert out == "False"


def test_flag_matches_numbas_own_check():
    pytest.importorskip("scipy")
    out = _run(
        """
        import edgecnn.kernels.cpu
        import numba.np.arraymath as arraymath
        deferred = arraymath._HAVE_BLAS
        print(deferred, arraymath._check_blas())
        """
    )
    assert out == "True True"


def test_flag_is_false_without_scipy():
    out = _run(
        """
        import sys
        sys.modules["scipy"] = None  # as if not installed
        import edgecnn.kernels.cpu
        import numba.np.arraymath as arraymath
        print(arraymath._HAVE_BLAS)
        """
    )
    assert out == "False"


def test_numba_dot_still_imports_scipy_when_compiled():
    pytest.importorskip("scipy")
    out = _run(
        """
        import sys
        import numba
        import numpy as np
        import edgecnn.kernels.cpu

        @numba.njit
        def dot(a, b):
            return np.dot(a, b)

        a = np.arange(4.0).reshape(2, 2)
        assert np.allclose(dot(a, a), a @ a)
        print("scipy.linalg" in sys.modules)
        """
    )
    assert out == "True"
