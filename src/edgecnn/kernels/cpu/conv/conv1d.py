"""1-D Conv and FusedConv ((N, C, L) inputs) on the CPU: a direct loop, BLOCK output channels at a
time, each filter tap one contiguous pass along the output row.

Why not the 2-D kernels on an (N, C, 1, L) view: their tiles and frames are laid out for planes, and
a one-row plane pays their copies and panel set-up for a few thousand multiply-adds (seed 003's radar
network has 4 k and 24 k per return). Here the input is read in place: for tap t, output positions
[lo[t], hi[t]) read the input positions o * stride + t * dilation - pad_begin, all inside the row, so
padding costs nothing and the inner loop has no bounds test. BLOCK output channels share each input
load. Offsets are unsigned integers into flat arrays, so that LLVM vectorises the inner loop (a
signed index carries numba's negative-index wraparound).

Tasks are (sample, block of output channels), shared among numba's workers in contiguous runs; bias
and the fused activation are applied to each block's rows while they are in cache.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.gemm.epilogue import activate, activation_args
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import constant_float32, is_float32, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import current_threads, small_conv, worker_share
from edgecnn.kernels.cpu.system.twins import parallel_and_serial
from edgecnn.ops.conv import ConvAttrs, conv_geometry
from edgecnn.ops.spatial import output_dims

BLOCK = 4
"""Output channels computed together: each input value loaded once feeds BLOCK multiply-adds."""


def tap_ranges(
    length: int, out_length: int, kernel: int, stride: int, dilation: int, pad_begin: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per tap t, the output positions [lo[t], hi[t]) whose input o * stride + t * dilation -
    pad_begin lies inside the row (an empty range where none does)."""
    lo = np.empty(kernel, np.int64)
    hi = np.empty(kernel, np.int64)
    for t in range(kernel):
        shift = t * dilation - pad_begin
        first = max(0, -(shift // stride))  # ceil(-shift / stride)
        end = min(out_length, (length - 1 - shift) // stride + 1) if length - 1 - shift >= 0 else 0
        lo[t], hi[t] = first, max(first, end)
    return lo, hi


@numba.njit(inline="always", cache=True)
def layout(geometry: np.ndarray) -> tuple[int, int, int, int, int, int, int, int, int]:
    """The first nine words of a 1-D convolution's ``geometry`` array (see ``_conv_1d``): C, L, M,
    C / group, K, out_length, stride, dilation, pad_begin."""
    g = geometry
    return g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8]


def _conv_1d(
    x_in: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    geometry: np.ndarray,
    parameters: np.ndarray,
    workers: int,
    out_in: np.ndarray,
) -> None:
    """x_in: (N, C, L); w: flat (M, C / group, K); out_in: C-contiguous (N, M, out_length). ``geometry``
    (int64): C, L, M, C / group, K, out_length, stride, dilation, pad_begin, activation kind;
    ``parameters`` (float64): the activation's alpha, low, high. Two arrays, not thirteen
    arguments: each argument costs a type check per call, which is most of a batch-1 layer's time.
    The arrays come in their own shapes for the same reason: a reshape in Python costs more than the
    batch-1 layer's arithmetic."""
    channels, length, kernels, group_channels, taps, out_length, stride, dilation, pad_begin = layout(
        geometry
    )
    kind = geometry[9]
    alpha, low, high = parameters[0], parameters[1], parameters[2]
    x, out = x_in.ravel(), out_in.reshape(out_in.size)  # flat views, made here: free in compiled code
    u = np.uint64
    groups = channels // group_channels
    per_group = kernels // groups
    blocks_per_group = (per_group + BLOCK - 1) // BLOCK
    blocks = groups * blocks_per_group
    samples = x.size // (channels * length)
    for worker in numba.prange(workers):
        first, end = worker_share(worker, workers, samples * blocks)
        for task in range(first, end):
            sample, block = task // blocks, task % blocks
            group, j0 = block // blocks_per_group, (block % blocks_per_group) * BLOCK
            m0 = group * per_group + j0
            count = min(BLOCK, per_group - j0)
            y0 = u((sample * kernels + m0) * out_length)
            for j in range(count):
                row = y0 + u(j * out_length)
                value = bias[m0 + j]
                for o in range(u(out_length)):
                    out[row + o] = value
            for c in range(group_channels):
                x0 = (sample * channels + group * group_channels + c) * length
                for t in range(taps):
                    first_o, end_o = lo[t], hi[t]
                    if end_o <= first_o:
                        continue
                    start = u(x0 + first_o * stride + t * dilation - pad_begin)
                    n = u(end_o - first_o)
                    w0 = u((m0 * group_channels + c) * taps + t)
                    w_step = u(group_channels * taps)
                    at = y0 + u(first_o)
                    step = u(out_length)
                    s = u(stride)
                    if count == BLOCK:
                        w_a, w_b = w[w0], w[w0 + w_step]
                        w_c, w_d = w[w0 + u(2) * w_step], w[w0 + u(3) * w_step]
                        at_b, at_c, at_d = at + step, at + u(2) * step, at + u(3) * step
                        if stride == 1:  # a literal unit stride: contiguous vector loads
                            for q in range(n):
                                v = x[start + q]
                                out[at + q] += w_a * v
                                out[at_b + q] += w_b * v
                                out[at_c + q] += w_c * v
                                out[at_d + q] += w_d * v
                        else:
                            for q in range(n):
                                v = x[start + q * s]
                                out[at + q] += w_a * v
                                out[at_b + q] += w_b * v
                                out[at_c + q] += w_c * v
                                out[at_d + q] += w_d * v
                    else:
                        for j in range(count):
                            weight = w[w0 + u(j) * w_step]
                            row = at + u(j) * step
                            for q in range(n):
                                out[row + q] += weight * x[start + q * s]
            if kind != 0:
                for i in range(u(count * out_length)):
                    out[y0 + i] = activate(out[y0 + i], kind, alpha, low, high)


conv_1d, conv_1d_serial = parallel_and_serial(_conv_1d, "conv_1d")


def when_conv_1d(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    """Any 1-D convolution with constant float32 weights (and bias): groups, strides, dilations and
    explicit or SAME padding alike."""
    if not (
        single_output(node)
        and isinstance(node.attrs, ConvAttrs)
        and types
        and is_float32(types[0], 3)
        and constant_float32(node, values, 1)
        and constant_float32(node, values, 2, optional=True)
    ):
        return False
    weights = values[1]
    assert weights is not None
    geo = conv_geometry(node.attrs, shape_of(types[0]), weights.shape)
    if geo.pads is None:
        return False
    (out_length,) = output_dims(shape_of(types[0])[2:], geo.kernel, geo.strides, geo.dilations, geo.pads)
    return isinstance(out_length, int) and out_length > 0


class Conv1d:
    """A prepared 1-D convolution: weights and bias flattened once, the taps' valid output ranges
    computed once."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        attrs = node.attrs
        assert isinstance(attrs, ConvAttrs) and values[1] is not None
        batch, channels, length = shape_of(types[0])
        weights = np.ascontiguousarray(values[1], np.float32)
        geo = conv_geometry(attrs, (batch, channels, length), weights.shape)
        assert geo.pads is not None
        (out_length,) = output_dims((length,), geo.kernel, geo.strides, geo.dilations, geo.pads)
        assert isinstance(out_length, int)
        kernels, group_channels, taps = weights.shape
        bias = values[2] if len(values) > 2 and values[2] is not None else np.zeros(kernels, np.float32)
        self.weights = weights.reshape(-1)
        self.bias = np.ascontiguousarray(bias, np.float32).reshape(kernels)
        stride, dilation, pad_begin = geo.strides[0], geo.dilations[0], geo.pads[0]
        self.lo, self.hi = tap_ranges(length, out_length, taps, stride, dilation, pad_begin)
        kind, *parameters = activation_args(attrs)
        self.geometry = np.array(
            [channels, length, kernels, group_channels, taps, out_length, stride, dilation, pad_begin, kind],
            np.int64,
        )
        self.parameters = np.array(parameters, np.float64)
        self.out_shape = (batch, kernels, out_length)
        self.small = small_conv(batch * kernels * group_channels * taps * out_length)

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=np.float32)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        if self.small:  # no parallel region to start
            conv_1d_serial(
                x,
                self.weights,
                self.bias,
                self.lo,
                self.hi,
                self.geometry,
                self.parameters,
                1,
                out,
            )
        else:
            conv_1d(
                x,
                self.weights,
                self.bias,
                self.lo,
                self.hi,
                self.geometry,
                self.parameters,
                current_threads(),
                out,
            )


register("conv_1d", Conv1d, when=when_conv_1d)
