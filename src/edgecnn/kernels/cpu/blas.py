"""numpy's own BLAS ``sgemm``, callable from compiled (numba) code.

Why: with GEMMs called from numba's worker threads, one thread pool (numba's) runs everything —
im2col, GEMM and epilogue of each output tile on the thread that owns the tile — while BLAS stays
single-threaded. Two pools (numba's and OpenBLAS's) that spin-wait on the same cores slow each
other down badly on a small CPU (issue 4: no oversubscription).

The library numpy loaded is found through threadpoolctl; its 64-bit-integer CBLAS ``sgemm`` is
registered under one fixed name, so code compiled against it stays valid in the on-disk cache
whichever build of the library provides it. Without such a symbol, ``AVAILABLE`` is False and the
kernels use ``np.matmul`` instead.
"""

from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import numba
import numpy as np
from numba import types

SYMBOL = "edgecnn_cblas_sgemm64"
"""The name compiled code calls; bound at import to the library's own symbol."""

_CANDIDATES = ("scipy_cblas_sgemm64_", "cblas_sgemm64_", "cblas_sgemm_64")
"""ILP64 CBLAS sgemm names: numpy >= 2 wheels (scipy-openblas), numpy 1.x wheels, MKL."""

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def _find_sgemm() -> str | None:
    """Bind SYMBOL to the sgemm of the BLAS numpy uses; the library symbol's name, or None."""
    from threadpoolctl import ThreadpoolController

    for lib in ThreadpoolController().lib_controllers:
        if lib.user_api != "blas":
            continue
        try:
            handle = ctypes.CDLL(lib.filepath)
        except OSError:
            continue
        for name in _CANDIDATES:
            function = getattr(handle, name, None)
            if function is not None:
                address = ctypes.cast(function, ctypes.c_void_p).value
                if address:
                    llvm.add_symbol(SYMBOL, address)
                    return name
    return None


LIBRARY_SYMBOL = _find_sgemm()
AVAILABLE = LIBRARY_SYMBOL is not None

_i32, _i64, _f32, _ptr = types.int32, types.int64, types.float32, types.voidptr
sgemm = types.ExternalFunction(
    SYMBOL,
    types.void(_i32, _i32, _i32, _i64, _i64, _i64, _f32, _ptr, _i64, _ptr, _i64, _f32, _ptr, _i64),
)
"""cblas_sgemm(layout, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)."""


@numba.njit(inline="always", cache=True)
def leading(a: np.ndarray) -> int:
    """Leading dimension (row stride in elements) of a 2-D view whose rows are contiguous."""
    if a.shape[0] <= 1:
        return max(a.shape[1], 1)
    return a.strides[0] // a.itemsize


@numba.njit(cache=True)
def gemm_into(a: np.ndarray, b: np.ndarray, b_transposed: bool, c: np.ndarray) -> None:
    """c = a @ b (or a @ b.T when ``b_transposed``) for float32 views with contiguous rows.
    Single-threaded when the BLAS pool is set to one thread, as callers ensure."""
    m, k = a.shape
    n = c.shape[1]
    if m == 0 or n == 0:
        return
    sgemm(
        np.int32(ROW_MAJOR),
        np.int32(NO_TRANS),
        np.int32(TRANS if b_transposed else NO_TRANS),
        m,
        n,
        k,
        np.float32(1.0),
        a.ctypes,
        leading(a),
        b.ctypes,
        leading(b),
        np.float32(0.0),
        c.ctypes,
        leading(c),
    )
