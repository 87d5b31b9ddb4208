"""Softmax on the CPU: one compiled pass per row instead of the reference's five numpy calls (max,
subtract, exp, sum, divide), whose fixed cost is most of a classifier head's time at batch 1 (seed
003's radar network: 10 scores).

The tensor is viewed as (outer, n, inner) with the softmax over n: the trailing axes for inputs of
opsets below 13 (``coerce_2d``), else the one axis. Rows of the same outer index are reduced together
along inner, so a channel softmax over an NCHW map reads contiguous runs. The arithmetic is the
reference's: subtract the maximum (NaN and infinities propagate as in numpy), exponentiate in
float32, divide by the sum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import is_float32, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import current_threads, is_small, worker_share
from edgecnn.kernels.cpu.system.twins import parallel_and_serial
from edgecnn.ops.activation import SoftmaxAttrs, softmax_axes


def _softmax(x_in: np.ndarray, out_in: np.ndarray, view: tuple[int, int, int], workers: int) -> None:
    """x_in, out_in: float32 of any shape, out_in C-contiguous, seen as ``view`` = (outer, n, inner)
    (the reshapes happen here: in Python each costs more than a classifier head's arithmetic)."""
    outer, n, inner = view
    x, out = x_in.ravel().reshape(view), out_in.reshape(view)
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, outer)
        peak = np.empty(inner, np.float32)
        total = np.empty(inner, np.float32)
        for o in range(first, end):
            rows, dest = x[o], out[o]
            peak[:] = rows[0]
            for k in range(1, n):
                for i in range(inner):
                    v, best = rows[k, i], peak[i]
                    peak[i] = v if v > best or v != v else best
            total[:] = 0.0
            for k in range(n):
                for i in range(inner):
                    e = np.exp(rows[k, i] - peak[i])
                    dest[k, i] = e
                    total[i] += e
            for k in range(n):
                for i in range(inner):
                    dest[k, i] = dest[k, i] / total[i]


softmax_rows, softmax_rows_serial = parallel_and_serial(_softmax, "softmax_rows")


def when_softmax(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    return (
        single_output(node)
        and isinstance(node.attrs, SoftmaxAttrs)
        and bool(types)
        and is_float32(types[0])
        and len(shape_of(types[0])) >= 1
    )


class Softmax:
    """The (outer, n, inner) view of the input fixed at plan time."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        attrs = node.attrs
        assert isinstance(attrs, SoftmaxAttrs)
        shape = shape_of(types[0])
        axes = softmax_axes(attrs, len(shape))
        first, last = axes[0], axes[-1] + 1
        self.view = (math.prod(shape[:first]), math.prod(shape[first:last]), math.prod(shape[last:]))
        self.shape = shape
        self.small = is_small(math.prod(shape) * 4)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(self.shape, np.float32)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        if self.small:  # no parallel region to start
            softmax_rows_serial(x, out, self.view, 1)
        else:
            softmax_rows(x, out, self.view, current_threads())


register("softmax", Softmax, when=when_softmax)
