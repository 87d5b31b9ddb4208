"""LRN across channels (AlexNet, GoogLeNet) on the CPU:
y = x / (bias + alpha / size * sum of x^2 over ``size`` neighbouring channels) ** beta.

Parallel over (image, block of pixels); for each pixel block the window sum runs down the channels
(add the square entering the window, drop the one leaving it) in float64, so every square is
computed once whatever the size. beta = 0.75 (Caffe's default) uses two square roots, not pow.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import is_float32, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import call, is_small
from edgecnn.ops.norm import LRNAttrs

PIXEL_BLOCK = 256
"""Pixels per task: the running sums of one block stay in L1 while the channels stream past."""


@numba.njit(cache=True, error_model="numpy")
def _lrn_block(
    x: np.ndarray,  # (C, P) one image
    size: int,
    scale: float,  # alpha / size
    bias: float,
    beta: float,
    p0: int,
    p1: int,
    out: np.ndarray,  # (C, P)
) -> None:
    channels = x.shape[0]
    before = (size - 1) // 2
    after = size - 1 - before
    width = p1 - p0
    window = np.zeros(width, dtype=np.float64)
    for c in range(min(after, channels)):  # the window of channel 0 holds channels 0..after-1 ...
        row = x[c, p0:p1]
        for i in range(width):
            window[i] += np.float64(row[i]) * row[i]
    for c in range(channels):
        entering = c + after
        if entering < channels:  # ... plus channel c + after as it is reached
            row = x[entering, p0:p1]
            for i in range(width):
                window[i] += np.float64(row[i]) * row[i]
        leaving = c - before - 1
        if leaving >= 0:
            row = x[leaving, p0:p1]
            for i in range(width):
                window[i] -= np.float64(row[i]) * row[i]
        source = x[c, p0:p1]
        dest = out[c, p0:p1]
        # a loop per case, not a test per element: LLVM would call pow in every lane and select
        if beta == 0.75:
            for i in range(width):
                root = np.sqrt(bias + scale * max(window[i], 0.0))  # the sum may dip below 0 by rounding
                dest[i] = source[i] / (root * np.sqrt(root))
        else:
            for i in range(width):
                dest[i] = source[i] / (bias + scale * max(window[i], 0.0)) ** beta


@numba.njit(parallel=True, nogil=True, cache=True)
def lrn_across_channels(
    x: np.ndarray,  # (N, C, P)
    size: int,
    scale: float,
    bias: float,
    beta: float,
    block: int,
    out: np.ndarray,  # (N, C, P), written
) -> None:
    batch, _, pixels = x.shape
    blocks = (pixels + block - 1) // block
    for job in numba.prange(batch * blocks):
        n, b = job // blocks, job % blocks
        p0 = b * block
        _lrn_block(x[n], size, scale, bias, beta, p0, min(p0 + block, pixels), out[n])


def when_lrn(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    return (
        single_output(node)
        and bool(types)
        and is_float32(types[0])
        and len(shape_of(types[0])) >= 2
        and isinstance(node.attrs, LRNAttrs)
    )


class LocalResponseNorm:
    """Spatial dims flattened to one pixel axis: (N, C, *spatial) -> (N, C, P)."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        attrs = node.attrs
        assert isinstance(attrs, LRNAttrs)
        self.shape = shape_of(types[0])
        self.size = attrs.size
        self.scale = float(attrs.alpha) / attrs.size
        self.bias, self.beta = float(attrs.bias), float(attrs.beta)
        self.pixels = int(np.prod(self.shape[2:]))
        self.small = is_small(int(np.prod(self.shape)) * 4)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(self.shape, dtype=np.float32)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray) -> None:
        """Writes into ``out`` (C-contiguous, the input's shape; must not overlap ``x``)."""
        n, c = self.shape[0], self.shape[1]
        flat = np.ascontiguousarray(x).reshape(n, c, self.pixels)
        call(
            lrn_across_channels,
            self.small,
            flat,
            self.size,
            self.scale,
            self.bias,
            self.beta,
            PIXEL_BLOCK,
            out.reshape(n, c, self.pixels),
        )


register("lrn", LocalResponseNorm, when=when_lrn)
