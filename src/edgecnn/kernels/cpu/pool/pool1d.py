"""1-D MaxPool and AveragePool ((N, C, L) inputs) and their fused forms with an activation, on the
CPU: each window tap one pass along the output row, in place on the input.

Why not the 2-D loops (pool/loops.py) on an (N, C, 1, L) view: their separable row/column passes and
scratch are built for planes; a one-row plane pays both passes for one. Here, as in the 1-D
convolution (conv/conv1d.py), tap t reduces the input positions o * stride + t * dilation -
pad_begin into outputs [lo[t], hi[t]), which all lie inside the row: no padded copy, no bounds test
in the loop. Max propagates NaN like the reference; the average multiplies by the reciprocal of the
taps counted for each output (inside the input, or inside the padded input with count_include_pad,
never ceil_mode's extra positions), computed once at plan time: within an ulp of the reference's
division, at a fraction of its cost. Each worker sums into a row of its own, which LLVM knows
aliases nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.conv1d import tap_ranges
from edgecnn.kernels.cpu.gemm.epilogue import activate, activation_args
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import is_float32, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import current_threads, is_small, worker_share
from edgecnn.kernels.cpu.system.twins import parallel_and_serial
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs, pool_geometry


def _pool_1d(
    x_in: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    inverse_counts: np.ndarray,
    geometry: np.ndarray,
    parameters: np.ndarray,
    workers: int,
    out_in: np.ndarray,
) -> None:
    """x_in: (N, C, length); out_in: C-contiguous (N, C, out_length); rows are (image, channel) pairs.
    ``geometry`` (int64): rows, length, out_length, stride, dilation, pad_begin, max (1) or average
    (0), activation kind; ``parameters`` (float64): the activation's alpha, low, high (packed as in
    conv/conv1d.py: one type check per array instead of one per scalar; the flat views are made
    here, where they cost nothing)."""
    rows, length, out_length, stride, dilation = (
        geometry[0],
        geometry[1],
        geometry[2],
        geometry[3],
        geometry[4],
    )
    pad_begin, is_max, kind = geometry[5], geometry[6] != 0, geometry[7]
    alpha, low, high = parameters[0], parameters[1], parameters[2]
    x, out = x_in.ravel(), out_in.reshape(out_in.size)
    u = np.uint64
    s = u(stride)
    zero = np.float32(0.0)
    start_value = np.float32(-np.inf) if is_max else zero
    taps = lo.shape[0]
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, rows)
        acc = np.empty(out_length, np.float32)  # the worker's own: no aliasing with x for LLVM
        for r in range(first, end):
            for o in range(u(out_length)):
                acc[o] = start_value
            for t in range(taps):
                if hi[t] <= lo[t]:
                    continue
                start = u(r * length + lo[t] * stride + t * dilation - pad_begin)
                at, n = u(lo[t]), u(hi[t] - lo[t])
                if is_max:
                    for q in range(n):
                        v, best = x[start + q * s], acc[at + q]
                        acc[at + q] = v if v > best or v != v else best
                elif stride == 1:
                    for q in range(n):
                        acc[at + q] += x[start + q]
                elif stride == 2:
                    for q in range(n):
                        acc[at + q] += x[start + u(2) * q]
                else:
                    for q in range(n):
                        acc[at + q] += x[start + q * s]
            if not is_max:
                for o in range(u(out_length)):
                    acc[o] *= inverse_counts[o]
            y0 = u(r * out_length)
            if kind == 0:
                for o in range(u(out_length)):
                    out[y0 + o] = acc[o]
            elif kind == 1:
                for o in range(u(out_length)):
                    v = acc[o]
                    out[y0 + o] = zero if v <= zero else v  # NaN stays NaN, as in activate
            else:
                for o in range(u(out_length)):
                    out[y0 + o] = activate(acc[o], kind, alpha, low, high)


pool_1d, pool_1d_serial = parallel_and_serial(_pool_1d, "pool_1d")


def when_pool_1d(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    if not (
        single_output(node)
        and isinstance(node.attrs, MaxPoolAttrs | AveragePoolAttrs)
        and types
        and is_float32(types[0], 3)
    ):
        return False
    geo = pool_geometry(node.attrs, shape_of(types[0]))
    return geo.pads is not None and isinstance(geo.out[0], int) and geo.out[0] > 0


def window_divisors(
    length: int,
    out_length: int,
    taps: int,
    stride: int,
    dilation: int,
    pads: tuple[int, int],
    with_pads: bool,
) -> np.ndarray:
    """Per output position, the taps an average divides by: those inside the input, or inside the
    explicitly padded input when ``with_pads`` (never the positions ceil_mode adds past the end).
    Counted from each window's first and last tap inside, in memory of the output's length: a
    window of a million taps must not cost a table of taps per output."""
    start = np.arange(out_length, dtype=np.int64) * stride - pads[0]  # the window's first position
    low, high = (-pads[0], length + pads[1]) if with_pads else (0, length)
    first = np.maximum(-((start - low) // dilation), 0)  # ceil((low - start) / dilation)
    last = np.minimum((high - 1 - start) // dilation, taps - 1)
    return np.maximum(last - first + 1, 0).astype(np.float32)


class Pool1d:
    """A prepared 1-D pooling: the taps' valid output ranges and the average's divisors computed once."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        attrs = node.attrs
        assert isinstance(attrs, MaxPoolAttrs | AveragePoolAttrs)
        batch, channels, length = shape_of(types[0])
        geo = pool_geometry(attrs, (batch, channels, length))
        assert geo.pads is not None
        out_length = int(geo.out[0])
        taps, stride, dilation = geo.kernel[0], geo.strides[0], geo.dilations[0]
        self.is_max = isinstance(attrs, MaxPoolAttrs)
        with_pads = bool(getattr(attrs, "count_include_pad", False))
        counts = window_divisors(
            length, out_length, taps, stride, dilation, (geo.pads[0], geo.pads[1]), with_pads
        )
        with np.errstate(divide="ignore"):  # no tap inside: 0 * inf is NaN, as the reference's 0 / 0
            self.inverse_counts = (np.float32(1.0) / counts).astype(np.float32)
        self.lo, self.hi = tap_ranges(length, out_length, taps, stride, dilation, geo.pads[0])
        kind, *parameters = activation_args(attrs)
        self.geometry = np.array(
            [batch * channels, length, out_length, stride, dilation, geo.pads[0], int(self.is_max), kind],
            np.int64,
        )
        self.parameters = np.array(parameters, np.float64)
        self.out_shape = (batch, channels, out_length)
        self.small = is_small(batch * channels * out_length * taps)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=np.float32)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        if self.small:  # no parallel region to start
            pool_1d_serial(x, self.lo, self.hi, self.inverse_counts, self.geometry, self.parameters, 1, out)
        else:
            pool_1d(
                x,
                self.lo,
                self.hi,
                self.inverse_counts,
                self.geometry,
                self.parameters,
                current_threads(),
                out,
            )


register("pool_1d", Pool1d, when=when_pool_1d)
