"""LayerNormalization on the CPU: one compiled pass per row (ConvNeXt's norm over the channels of a
channels-last map) instead of the reference's float64 copies and reductions over the whole tensor.

The tensor is viewed as (rows, n) with n the product of the dimensions from ``axis`` on; each row's
mean and variance are accumulated in float64, as the reference computes them (in vector lanes: the
order of the additions differs from numpy's, far below float32's resolution), and the constant
scale and bias are broadcast to n values once, when the plan is built. Only the first output (Y)
is accepted: a node that also names Mean or InvStdDev runs on the reference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import constant_float32, is_float32, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import current_threads, is_small, worker_share
from edgecnn.ops.common import normalize_axis
from edgecnn.ops.norm import LayerNormalizationAttrs

REASSOCIATE = {"reassoc"}
"""The row sums may be reordered, so they run as vector partial sums instead of one float64 add
after another; no other fast-math licence (NaN and the infinities keep their meaning)."""


@numba.njit(inline="always", cache=True)
def _normalize_rows(
    x: np.ndarray, scale: np.ndarray, bias: np.ndarray, epsilon: float, out: np.ndarray, first: int, end: int
) -> None:
    n = x.shape[1]
    for r in range(first, end):
        total = 0.0
        for i in range(n):
            total += np.float64(x[r, i])
        mean = total / n
        spread = 0.0
        for i in range(n):
            d = np.float64(x[r, i]) - mean
            spread += d * d
        inv_std = 1.0 / math.sqrt(spread / n + epsilon)
        for i in range(n):
            out[r, i] = np.float32((np.float64(x[r, i]) - mean) * inv_std * scale[i] + bias[i])


@numba.njit(parallel=True, nogil=True, cache=True, fastmath=REASSOCIATE)
def layer_norm_rows(
    x: np.ndarray, scale: np.ndarray, bias: np.ndarray, epsilon: float, out: np.ndarray, workers: int
) -> None:
    """x, out: (rows, n) float32; scale, bias: (n,) float64. Rows shared out among ``workers``."""
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, x.shape[0])
        _normalize_rows(x, scale, bias, epsilon, out, first, end)


@numba.njit(nogil=True, cache=True, fastmath=REASSOCIATE)
def layer_norm_rows_serial(
    x: np.ndarray, scale: np.ndarray, bias: np.ndarray, epsilon: float, out: np.ndarray
) -> None:
    """``layer_norm_rows`` on the calling thread, for tensors below the thread grain."""
    _normalize_rows(x, scale, bias, epsilon, out, 0, x.shape[0])


def _row_length(node: Node, types: Sequence[TensorType | None]) -> int:
    assert isinstance(node.attrs, LayerNormalizationAttrs)
    shape = shape_of(types[0])
    return math.prod(shape[normalize_axis(node.attrs.axis, len(shape)) :])


def _broadcast(value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``value`` broadcast to ``shape`` (the normalized dimensions), flat in float64, or None."""
    try:
        return np.broadcast_to(value, shape).astype(np.float64).reshape(-1)
    except ValueError:
        return None


def _parameters(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> tuple[np.ndarray, np.ndarray] | None:
    """The scale and bias as n float64 values each (bias zero when omitted), or None."""
    assert isinstance(node.attrs, LayerNormalizationAttrs)
    shape = shape_of(types[0])
    normalized = shape[normalize_axis(node.attrs.axis, len(shape)) :]
    scale = values[1]
    assert scale is not None
    bias = values[2] if len(values) > 2 and values[2] is not None else np.zeros((), np.float32)
    flat_scale, flat_bias = _broadcast(scale, normalized), _broadcast(bias, normalized)
    if flat_scale is None or flat_bias is None:
        return None
    return np.ascontiguousarray(flat_scale), np.ascontiguousarray(flat_bias)


def when_layer_norm(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    return (
        isinstance(node.attrs, LayerNormalizationAttrs)
        and single_output(node)
        and len(types) >= 2
        and is_float32(types[0])
        and len(shape_of(types[0])) >= 1
        and constant_float32(node, values, 1)
        and constant_float32(node, values, 2, optional=True)
        and _parameters(node, types, values) is not None
    )


class LayerNorm:
    """The (rows, n) view and the broadcast parameters, fixed at plan time."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        assert isinstance(node.attrs, LayerNormalizationAttrs)
        self.shape = shape_of(types[0])
        n = _row_length(node, types)
        self.view = (math.prod(self.shape) // n, n)
        parameters = _parameters(node, types, values)
        assert parameters is not None
        self.scale, self.bias = parameters
        self.epsilon = float(node.attrs.epsilon)
        self.small = is_small(math.prod(self.shape))

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.shape, np.float32)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes Y into ``out`` (C-contiguous, x's shape; must not overlap ``x``)."""
        rows, dest = np.ascontiguousarray(x).reshape(self.view), out.reshape(self.view)
        if self.small:
            layer_norm_rows_serial(rows, self.scale, self.bias, self.epsilon, dest)
        else:
            layer_norm_rows(rows, self.scale, self.bias, self.epsilon, dest, current_threads())


register("layer_norm", LayerNorm, when=when_layer_norm)
