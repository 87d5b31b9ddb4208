"""numpy's own BLAS (``sgemm``, ``sgemv``), callable from compiled (numba) code.

Why: with GEMMs called from numba's worker threads, one thread pool (numba's) runs everything —
im2col, GEMM and epilogue of each output tile on the thread that owns the tile — while BLAS stays
single-threaded. Two pools (numba's and OpenBLAS's) that spin-wait on the same cores slow each
other down badly on a small CPU (issue 4: no oversubscription).

The library numpy loaded is found through threadpoolctl; its 64-bit-integer CBLAS functions are
registered under fixed names, so code compiled against them stays valid in the on-disk cache
whichever build of the library provides them. Without them, ``AVAILABLE`` is False and the
kernels use ``np.matmul`` instead.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import cast

import llvmlite.binding as llvm
import numba
import numpy as np
from numba import types
from numba.core.typing.templates import Signature

_SUFFIXES = (("scipy_cblas_", "64_"), ("cblas_", "64_"), ("cblas_", "_64"))
"""How ILP64 CBLAS names are spelled: numpy >= 2 wheels (scipy-openblas), numpy 1.x wheels, MKL."""

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def _bind(functions: tuple[str, ...]) -> str | None:
    """Register ``edgecnn_cblas_<f>64`` for every function of the BLAS numpy uses, all from one
    library and one naming scheme; returns the library's sgemm name, or None if it lacks any."""
    from threadpoolctl import ThreadpoolController

    for lib in ThreadpoolController().lib_controllers:
        if lib.user_api != "blas":
            continue
        try:
            handle = ctypes.CDLL(lib.filepath)
        except OSError:
            continue
        for prefix, suffix in _SUFFIXES:
            pointers = [getattr(handle, f"{prefix}{f}{suffix}", None) for f in functions]
            addresses = [ctypes.cast(p, ctypes.c_void_p).value if p is not None else None for p in pointers]
            if all(addresses):
                for function, address in zip(functions, addresses):
                    llvm.add_symbol(f"edgecnn_cblas_{function}64", address)
                return f"{prefix}{functions[0]}{suffix}"
    return None


LIBRARY_SYMBOL = _bind(("sgemm", "sgemv"))
AVAILABLE = LIBRARY_SYMBOL is not None


def _external(symbol: str, signature: Signature) -> Callable[..., None]:
    """The C function ``symbol`` as compiled code calls it. Typed as that call: numba's stubs give
    an ExternalFunction the call of every numba type, which builds a signature from types."""
    return cast("Callable[..., None]", types.ExternalFunction(symbol, signature))


_i32, _i64, _f32, _ptr = types.int32, types.int64, types.float32, types.voidptr
sgemm = _external(
    "edgecnn_cblas_sgemm64",
    types.void(_i32, _i32, _i32, _i64, _i64, _i64, _f32, _ptr, _i64, _ptr, _i64, _f32, _ptr, _i64),
)
"""cblas_sgemm(layout, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)."""

sgemv = _external(
    "edgecnn_cblas_sgemv64",
    types.void(_i32, _i32, _i64, _i64, _f32, _ptr, _i64, _ptr, _i64, _f32, _ptr, _i64),
)
"""cblas_sgemv(layout, trans, M, N, alpha, A, lda, X, incx, beta, Y, incy)."""


@numba.njit(inline="always", cache=True)
def leading(a: np.ndarray) -> int:
    """Leading dimension (row stride in elements) of a 2-D view whose rows are contiguous."""
    if a.shape[0] <= 1:
        return max(a.shape[1], 1)
    return a.strides[0] // a.itemsize


@numba.njit(inline="always", cache=True)
def column_step(a: np.ndarray) -> int:
    """Distance in elements between the rows of a one-column view (its only column, as a vector)."""
    return max(a.strides[0] // a.itemsize, 1) if a.shape[0] > 1 else 1


@numba.njit(cache=True)
def gemm_into(a: np.ndarray, b: np.ndarray, b_transposed: bool, c: np.ndarray) -> None:
    """c = a @ b (or a @ b.T when ``b_transposed``) for float32 views with contiguous rows.

    A one-row or one-column product goes to sgemv: sgemm would copy (pack) the whole weight matrix
    first, which triples the memory traffic of a fully connected layer at batch 1. Single-threaded
    when the BLAS pool is set to one thread, as callers ensure.
    """
    m, k = a.shape
    n = c.shape[1]
    if m == 0 or n == 0:
        return
    one, zero = np.float32(1.0), np.float32(0.0)
    if m == 1:  # c[0, :] = op(b) @ a[0, :]
        if b_transposed:  # b is (n, k): y = b @ x
            sgemv(
                np.int32(ROW_MAJOR),
                np.int32(NO_TRANS),
                n,
                k,
                one,
                b.ctypes,
                leading(b),
                a.ctypes,
                1,
                zero,
                c.ctypes,
                1,
            )
        else:  # b is (k, n): y = b.T @ x
            sgemv(
                np.int32(ROW_MAJOR),
                np.int32(TRANS),
                k,
                n,
                one,
                b.ctypes,
                leading(b),
                a.ctypes,
                1,
                zero,
                c.ctypes,
                1,
            )
        return
    if n == 1:  # c[:, 0] = a @ (b's only column, or row when transposed)
        x_step = 1 if b_transposed else column_step(b)
        sgemv(
            np.int32(ROW_MAJOR),
            np.int32(NO_TRANS),
            m,
            k,
            one,
            a.ctypes,
            leading(a),
            b.ctypes,
            x_step,
            zero,
            c.ctypes,
            column_step(c),
        )
        return
    sgemm(
        np.int32(ROW_MAJOR),
        np.int32(NO_TRANS),
        np.int32(TRANS if b_transposed else NO_TRANS),
        m,
        n,
        k,
        one,
        a.ctypes,
        leading(a),
        b.ctypes,
        leading(b),
        zero,
        c.ctypes,
        leading(c),
    )
