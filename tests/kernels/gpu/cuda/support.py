"""Shared by the CUDA-only tests that need a GPU (cuBLAS, CuPy arrays, NVML): importing it skips the
module without CuPy or a CUDA GPU (tests/kernels/gpu/backends holds what CUDA shares with OpenCL)."""

from __future__ import annotations

import pytest

pytest.importorskip("cupy")

from kernels.gpu.backends.support import unavailable

_reason = unavailable("cuda")
if _reason is not None:
    pytest.skip(_reason, allow_module_level=True)
