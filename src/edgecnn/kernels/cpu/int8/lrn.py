"""Compiled QLinearLRN: LRN across channels on 8-bit data, Q(LRN(DQ(x))) in one pass.

A QDQ model runs the float LRN between a DequantizeLinear and a QuantizeLinear; this kernel reads
the 8-bit codes and writes 8-bit codes, each value dequantised in float32 as DequantizeLinear
does, the LRN computed in float64 on those values as edgecnn.ops.norm's reference computes it
(squares summed over the channel window, x / (bias + alpha / size * sum) ** beta, the quotient
rounded to float32), then quantised as QuantizeLinear does (float32 division by the scale, round
half to even, zero point, saturation). It differs from the reference by one code only where the
float LRN itself rounds differently (a quotient within float64 rounding of a half-way point).

Parallel over (image, band of pixels); within a band the window of squares runs down the channels
as a running sum (the square entering the window added, the one leaving it taken off) in the same
loop that writes the channel's codes, on unsigned offsets so that LLVM vectorises it. beta = 0.75
(Caffe's, GoogLeNet's and AlexNet's) takes two square roots instead of pow.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.int8.eltwise import ROUNDING, ROUNDING_LIMIT, concrete_8bit, scalar_constants
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.threads import call, is_small
from edgecnn.ops.norm import LRNAttrs

PIXEL_BAND = 512
"""Pixels per task: the band's float64 running sums (4 KiB) stay in L1 while the channels pass."""


@numba.njit(inline="always", cache=True)
def _square(code: np.integer, zero: np.int32, scale: np.float32) -> np.float64:
    """The square of the dequantised value, exact in float64."""
    v = np.float64(np.float32(np.float32(np.int32(code) - zero) * scale))
    return v * v


@numba.njit(inline="always", cache=True)
def _code(
    x: np.ndarray,
    k: np.uint64,
    zero: np.int32,
    scale: np.float32,
    denominator: np.float64,
    y_scale: np.float32,
    y_zero: np.float32,
    low: np.float32,
    high: np.float32,
) -> np.int32:
    """The output code of x[k]: Q(fl32(DQ(x[k]) / denominator)), rounding half to even."""
    v = np.float32(np.float32(np.int32(x[k]) - zero) * scale)
    y = np.float32(np.float64(v) / denominator)
    q = min(max(np.float32(y / y_scale), -ROUNDING_LIMIT), ROUNDING_LIMIT)
    return np.int32(min(max(((q + ROUNDING) - ROUNDING) + y_zero, low), high))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _band(
    x: np.ndarray,  # (C * P,) the codes of one image
    out: np.ndarray,  # (C * P,) written
    channels: int,
    pixels: int,
    p0: int,
    width: int,
    params: np.ndarray,  # float64: x zero point, x scale, alpha / size, bias, beta, y scale, y zero, low, high
    size: int,
    window: np.ndarray,  # float64 (>= width,) scratch
) -> None:
    """Codes of pixels [p0, p0 + width) of every channel of one image."""
    zero, scale = np.int32(params[0]), np.float32(params[1])
    alpha, bias, beta = params[2], params[3], params[4]
    y_scale, y_zero = np.float32(params[5]), np.float32(params[6])
    low, high = np.float32(params[7]), np.float32(params[8])
    before = (size - 1) // 2
    after = size - 1 - before
    n = np.uint64(width)
    for i in range(n):
        window[i] = 0.0
    for c in range(min(after, channels)):  # channel 0's window: channels 0 .. after - 1, then c + after
        row = np.uint64(c * pixels + p0)
        for i in range(n):
            window[i] += _square(x[row + i], zero, scale)
    for c in range(channels):
        entering, leaving = c + after, c - before - 1
        # rows outside the image count with weight 0 (read from a row that exists)
        gain = 1.0 if entering < channels else 0.0
        loss = 1.0 if leaving >= 0 else 0.0
        enter_row = np.uint64(min(entering, channels - 1) * pixels + p0)
        leave_row = np.uint64(max(leaving, 0) * pixels + p0)
        row = np.uint64(c * pixels + p0)
        for i in range(n):
            window[i] += gain * _square(x[enter_row + i], zero, scale) - loss * _square(
                x[leave_row + i], zero, scale
            )
        # two loops, not a test per element: LLVM would call pow in every lane and select
        if beta == 0.75:
            for i in range(n):
                root = np.sqrt(bias + alpha * max(window[i], 0.0))  # the sum may dip below 0 by rounding
                out[row + i] = _code(
                    x, row + i, zero, scale, root * np.sqrt(root), y_scale, y_zero, low, high
                )
        else:
            for i in range(n):
                denominator = (bias + alpha * max(window[i], 0.0)) ** beta
                out[row + i] = _code(x, row + i, zero, scale, denominator, y_scale, y_zero, low, high)


@numba.njit(parallel=True, nogil=True, cache=True)
def qlinear_lrn_into(
    x: np.ndarray,  # (N, C * P)
    channels: int,
    params: np.ndarray,
    size: int,
    band: int,
    out: np.ndarray,  # (N, C * P), written
) -> None:
    batch, flat = x.shape
    pixels = flat // channels
    bands = (pixels + band - 1) // band
    for job in numba.prange(batch * bands):
        n, b = job // bands, job % bands
        p0 = b * band
        window = np.empty(band, dtype=np.float64)
        _band(x[n], out[n], channels, pixels, p0, min(p0 + band, pixels) - p0, params, size, window)


def when_lrn(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    x = types[0] if types else None
    if not (concrete_8bit(x) and len(node.outputs) == 1 and isinstance(node.attrs, LRNAttrs)):
        return False
    assert x is not None
    y_zp = values[4] if len(values) > 4 else None
    return (
        len(x.dims) >= 2
        and scalar_constants(values, (1, 2, 3, 4))
        and y_zp is not None
        and y_zp.dtype == x.dtype
        and node.attrs.bias > 0  # no zero denominators
    )


class QLinearLRNKernel:
    """Spatial dims flattened to one pixel axis: (N, C, *spatial) -> (N, C * P)."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        attrs = node.attrs
        assert isinstance(attrs, LRNAttrs)
        x = types[0]
        x_scale, x_zp, y_scale, y_zp = values[1], values[2], values[3], values[4]
        assert x is not None and x_scale is not None and x_zp is not None
        assert y_scale is not None and y_zp is not None
        self.shape, self.dtype = x.dims, np.dtype(x.dtype)
        info = np.iinfo(self.dtype)
        self.params = np.array(
            [
                int(x_zp.reshape(())),
                np.float32(x_scale.reshape(())),
                float(attrs.alpha) / attrs.size,
                float(attrs.bias),
                float(attrs.beta),
                np.float32(y_scale.reshape(())),
                int(y_zp.reshape(())),
                info.min,
                info.max,
            ],
            dtype=np.float64,
        )
        self.size = attrs.size
        self.small = is_small(int(np.prod(self.shape)))

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.shape, dtype=self.dtype)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, x's shape and type; must not overlap ``x``)."""
        n, c = self.shape[0], self.shape[1]
        flat = np.ascontiguousarray(x).reshape(n, -1)
        call(qlinear_lrn_into, self.small, flat, c, self.params, self.size, PIXEL_BAND, out.reshape(n, -1))


register("int8_lrn", QLinearLRNKernel, when=when_lrn)

__all__ = ["QLinearLRNKernel"]
