"""cuBLAS through CuPy, called directly: row-major products through the column-major library,
batched, with either operand shared across the batch. Gemm / FusedGemm / MatMul on CUDA against the
reference are in tests/kernels/gpu/backends/test_dense.py."""

from __future__ import annotations

import numpy as np
import pytest

from edgecnn.kernels.cuda import get_device
from edgecnn.kernels.cuda.blas import ONE
from kernels.gpu.backends.support import rand
from kernels.gpu.cuda import support  # noqa: F401  (skips without CuPy or a CUDA GPU)


@pytest.mark.parametrize(("batches", "shared"), [(1, ""), (3, "a"), (3, "b"), (2, "")])
def test_direct_cublas_gemm_batched_and_shared_operands(batches: int, shared: str) -> None:
    """Row-major products through the column-major library, one operand optionally shared."""
    device = get_device(0)
    rng = np.random.default_rng(batches)
    m, n, k = 5, 7, 3
    a = rand(rng, 1 if shared == "a" else batches, m, k)
    b = rand(rng, 1 if shared == "b" else batches, k, n)
    da, db, y = device.upload(a), device.upload(b), device.empty((batches, m, n))
    alpha = np.array([0.5], np.float32)
    a_stride, b_stride = (0 if shared == "a" else m * k), (0 if shared == "b" else k * n)
    device.blas.gemm(m, n, k, da.data.ptr, db.data.ptr, y.data.ptr, alpha, batches, a_stride, b_stride)
    np.testing.assert_allclose(y.get(), 0.5 * (a @ b), rtol=1e-5, atol=1e-6)
    device.blas.gemm(m, n, k, da.data.ptr, db.data.ptr, y.data.ptr, ONE)
    np.testing.assert_allclose(y.get()[0], a[0] @ b[0], rtol=1e-5, atol=1e-6)
