"""Gelu on the CPU in one compiled pass (ConvNeXt's MLP, after ``passes/fuse_gelu.py`` has turned
the exporters' Erf form into one node): the exact form computes erf in float64 as the reference does,
the tanh approximation in float32 as the reference does."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import is_float32, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import current_threads, is_small, worker_share
from edgecnn.ops.activation import GeluAttrs

APPROXIMATIONS = {"none": 0, "tanh": 1}


@numba.njit(inline="always", cache=True)
def _gelu_span(x: np.ndarray, out: np.ndarray, tanh: bool, first: int, end: int) -> None:
    root2 = np.float64(np.float32(math.sqrt(2.0)))  # x / sqrt(2) rounded to float32, as numpy divides
    half = np.float32(0.5)
    if tanh:
        c, k, one = np.float32(math.sqrt(2.0 / math.pi)), np.float32(0.044715), np.float32(1.0)
        for i in range(first, end):
            v = x[i]
            out[i] = half * v * (one + np.tanh(c * (v + k * v * v * v)))
    else:
        for i in range(first, end):
            v = x[i]
            scaled = np.float64(np.float32(np.float64(v) / root2))
            out[i] = np.float32(np.float64(half * v) * (1.0 + math.erf(scaled)))


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
