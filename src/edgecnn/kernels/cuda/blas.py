"""Row-major float32 GEMMs straight through cuBLAS (sgemm, sgemmStridedBatched), without
cupy.matmul's Python layer: at batch 1 a model's time is the host's time to launch its steps, and a
direct call costs a fraction of cupy.matmul's.

cuBLAS is column-major: a row-major (m x n) Y = A @ B is the column-major Y^T = B^T @ A^T, so the
operands go in swapped, each with its row length as the leading dimension."""

from __future__ import annotations

from typing import Any

import numpy as np


class Blas:
    """The cuBLAS calls of one device (the handle is CuPy's, bound to the current stream)."""

    def __init__(self, cupy: Any) -> None:
        from cupy_backends.cuda.libs import cublas

        self.lib = cublas
        self.handle = cupy.cuda.device.get_cublas_handle
        self.zero = np.zeros(1, np.float32)  # host scalars: pointer mode HOST reads them at the call

    def gemm(
        self,
        m: int,
        n: int,
        k: int,
        a: int,
        b: int,
        y: int,
        alpha: np.ndarray,
        batches: int = 1,
        a_stride: int = 0,
        b_stride: int = 0,
    ) -> None:
        """Y[i] = alpha * A[i] @ B[i] for i < batches: device pointers of C-contiguous float32 (m x k),
        (k x n) and (m x n) matrices, batch i of A at i * a_stride elements, of B at i * b_stride
        (0: one matrix shared by every batch), of Y at i * m * n. ``alpha`` is a float32 array of one."""
        lib = self.lib
        handle = self.handle()
        lib.setPointerMode(handle, lib.CUBLAS_POINTER_MODE_HOST)
        op = lib.CUBLAS_OP_N
        if batches == 1:
            lib.sgemm(handle, op, op, n, m, k, alpha.ctypes.data, b, n, a, k, self.zero.ctypes.data, y, n)
        else:
            lib.sgemmStridedBatched(handle, op, op, n, m, k, alpha.ctypes.data, b, n, b_stride, a, k, a_stride,
                                    self.zero.ctypes.data, y, n, m * n, batches)  # fmt: skip


ONE = np.ones(1, np.float32)
"""alpha = 1."""
