"""Gelu on the CPU in one compiled pass (ConvNeXt's MLP, after ``passes/fuse_gelu.py`` has turned
the exporters' Erf form into one node).

The exact form takes erf from Abramowitz and Stegun's formula 7.1.26 (a degree-5 polynomial in
1 / (1 + p|x|) times exp(-x^2), absolute error below 1.5e-7) in float32: numba has no vectorised
erf, and the float64 ``math.erf`` per element is several times slower. The tanh approximation is
computed in float32, tanh from exp(-2|y|). Both exponentials are fastmath's ``exp_nonpositive``
(``np.exp`` and ``np.tanh`` are scalar libm calls that keep the loop from vectorising).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.fastmath import exp_nonpositive, quotient
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import is_float32, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import current_threads, is_small, worker_share
from edgecnn.ops.activation import GeluAttrs

APPROXIMATIONS = {"none": 0, "tanh": 1}


ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
"""Abramowitz and Stegun 7.1.26: erf(z) = 1 - t (a1 + t (a2 + ... + t a5)) exp(-z^2), t = 1 / (1 + p z)."""


@numba.njit(inline="always", cache=True)
def _gelu_span(x: np.ndarray, out: np.ndarray, tanh: bool, first: int, end: int) -> None:
    """out[first:end] = gelu(x[first:end]); unsigned offsets and fastmath's exp and bare division
    leave the loops free of calls and checks, so they vectorise."""
    half, one, two = np.float32(0.5), np.float32(1.0), np.float32(2.0)
    start, count = np.uint64(first), np.uint64(end - first)
    if tanh:
        c, k = np.float32(math.sqrt(2.0 / math.pi)), np.float32(0.044715)
        for i in range(count):
            v = x[start + i]
            y = c * (v + k * v * v * v)
            e = exp_nonpositive(-two * abs(y))  # tanh|y| = (1 - e) / (1 + e)
            th = quotient(one - e, one + e)
            out[start + i] = half * v * (one + (th if y >= 0 else -th))
    else:
        root_half, p = np.float32(math.sqrt(0.5)), np.float32(ERF_P)
        a1, a2, a3 = np.float32(ERF_A[0]), np.float32(ERF_A[1]), np.float32(ERF_A[2])
        a4, a5 = np.float32(ERF_A[3]), np.float32(ERF_A[4])
        for i in range(count):
            v = x[start + i]
            z = abs(v) * root_half
            t = quotient(one, one + p * z)
            erf = one - ((((a5 * t + a4) * t + a3) * t + a2) * t + a1) * t * exp_nonpositive(-z * z)
            out[start + i] = half * v * (one + (erf if v >= 0 else -erf))


@numba.njit(parallel=True, nogil=True, cache=True)
def gelu_flat(x: np.ndarray, out: np.ndarray, tanh: bool, workers: int) -> None:
    """out = gelu(x) over flat float32 arrays, a contiguous share per worker."""
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, x.shape[0])
        _gelu_span(x, out, tanh, first, end)


@numba.njit(nogil=True, cache=True)
def gelu_flat_serial(x: np.ndarray, out: np.ndarray, tanh: bool) -> None:
    """``gelu_flat`` on the calling thread, for tensors below the thread grain."""
    _gelu_span(x, out, tanh, 0, x.shape[0])


def when_gelu(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    return (
        single_output(node)
        and isinstance(node.attrs, GeluAttrs)
        and node.attrs.approximate in APPROXIMATIONS
        and bool(types)
        and is_float32(types[0])
    )


class Gelu:
    in_place = True  # run_into accepts out = x: each element is read before it is written

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        assert isinstance(node.attrs, GeluAttrs)
        self.tanh = APPROXIMATIONS[node.attrs.approximate] == 1
        self.shape = shape_of(types[0])
        self.small = is_small(math.prod(self.shape))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(self.shape, np.float32)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray) -> None:
        """Writes into ``out`` (C-contiguous, x's shape)."""
        flat, dest = np.ascontiguousarray(x).reshape(-1), out.reshape(-1)
        if self.small:
            gelu_flat_serial(flat, dest, self.tanh)
        else:
            gelu_flat(flat, dest, self.tanh, current_threads())


register("gelu", Gelu, when=when_gelu)
