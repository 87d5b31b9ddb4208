"""Shared by the OpenCL-only tests (GEMM variants, runtime limits): importing it skips the module
without pyopencl or an OpenCL device; OPENCL runs nodes on opencl:0 like the tests in tests/kernels/gpu/backends."""

from __future__ import annotations

import pytest

pytest.importorskip("pyopencl")

from kernels.gpu.backends.support import Backend, unavailable

_reason = unavailable("opencl")
if _reason is not None:
    pytest.skip(_reason, allow_module_level=True)

OPENCL = Backend("opencl")
