"""Compiled QLinearLRN: LRN across channels on 8-bit data, Q(LRN(DQ(x))) in one pass.

A QDQ model runs the float LRN between a DequantizeLinear and a QuantizeLinear; this kernel reads
the 8-bit codes and writes 8-bit codes without the float tensors between. With d = code - x's zero
point (exact in float32) the float graph's quotient by y's scale is

    d * xs / ys / (bias + alpha / size * xs**2 * (sum of d**2 over the channel window)) ** beta,

and the window's sum of d**2 is an integer that float32 holds exactly (for sizes up to
LARGEST_SIZE), kept as a running sum down the channels (the square entering the window added, the
one leaving it taken off). The rest is float32 (pow in float64 where beta is not 0.75, Caffe's,
GoogLeNet's and AlexNet's, which takes two square roots), rounded half to even, plus y's zero
point, saturated (``loops.saturated``). That is a few float32 roundings (below 1e-6 relative) from the reference's float
LRN (float64 sums, quotient rounded to float32), so a code differs from the reference's, by one,
only where the exact quotient lies that close to a half-way point: where float LRNs round
differently (onnxruntime's float32 LRN differs from the reference in such places too).

Parallel over (image, band of pixels); the loops run over a band on unsigned offsets, so that LLVM
vectorises them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.int8.eltwise import concrete_8bit, scalar_constants
from edgecnn.kernels.cpu.int8.loops import saturated
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.threads import call, current_threads, is_small
from edgecnn.ops.norm import LRNAttrs

PIXEL_BAND = 512
"""Pixels per task at most: the band's window sums and factors (2 KiB each) stay in L1 while the
channels pass."""
LARGEST_SIZE = 256
"""Window sizes up to this keep the window's sums of squared code differences (each at most 255**2)
below 2**24, exact in float32."""


@numba.njit(inline="always", cache=True)
def _centered(code: np.integer, zero: np.float32) -> np.float32:
    """code - zero point, exact in float32 (16 lanes where int64 differences would give 8)."""
    return np.float32(code) - zero


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
    window: np.ndarray,  # float32 (>= width,) scratch
    factors: np.ndarray,  # float32 (>= width,) scratch
) -> None:
    """Codes of pixels [p0, p0 + width) of every channel of one image: per channel, the window's
    sums updated, each pixel's factor from its sum, then each code d times its factor, rounded."""
    zero, scale = np.float32(params[0]), np.float32(params[1])
    gain = np.float32(params[2] * np.float64(scale) * np.float64(scale))  # alpha / size * scale**2
    bias, beta = np.float32(params[3]), params[4]
    ratio = np.float32(np.float64(scale) / params[5])  # x's scale / y's
    y_zero, low, high = int(params[6]), int(params[7]), int(params[8])
    before = (size - 1) // 2
    after = size - 1 - before
    n = np.uint64(width)
    for i in range(n):
        window[i] = 0
    for c in range(min(after, channels)):  # channel 0's window: channels 0 .. after - 1, then c + after
        row = np.uint64(c * pixels + p0)
        for i in range(n):
            d = _centered(x[row + i], zero)
            window[i] += d * d
    for c in range(channels):
        entering, leaving = c + after, c - before - 1
        # rows outside the image count with weight 0 (read from a row that exists)
        enter, leave = np.float32(entering < channels), np.float32(leaving >= 0)
        enter_row = np.uint64(min(entering, channels - 1) * pixels + p0)
        leave_row = np.uint64(max(leaving, 0) * pixels + p0)
        row = np.uint64(c * pixels + p0)
        for i in range(n):
            e = _centered(x[enter_row + i], zero)
            g = _centered(x[leave_row + i], zero)
            window[i] += enter * (e * e) - leave * (g * g)
        # the factor taking (code - zero point) to the quotient by y's scale; a loop per case, not
        # a test per element: LLVM would call pow in every lane and select
        if beta == 0.75:
            for i in range(n):
                root = np.sqrt(bias + gain * window[i])
                factors[i] = ratio / (root * np.sqrt(root))
        else:
            for i in range(n):
                factors[i] = np.float32(np.float64(ratio) / np.float64(bias + gain * window[i]) ** beta)
        for i in range(n):
            out[row + i] = np.int32(saturated(_centered(x[row + i], zero) * factors[i], y_zero, low, high))


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
        window = np.empty(band, dtype=np.float32)
        factors = np.empty(band, dtype=np.float32)
        width = min(p0 + band, pixels) - p0
        _band(x[n], out[n], channels, pixels, p0, width, params, size, window, factors)


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
        and node.attrs.size <= LARGEST_SIZE
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
        band = balanced_band(flat.shape[1] // c, n, 1 if self.small else current_threads())
        call(qlinear_lrn_into, self.small, flat, c, self.params, self.size, band, out.reshape(n, -1))


def balanced_band(pixels: int, images: int, workers: int) -> int:
    """The band width (at most PIXEL_BAND) that splits ``images`` planes of ``pixels`` into a
    multiple of ``workers`` tasks where a few more bands make one: 7 bands of 448 pixels on two
    workers leave one idle for a seventh of the time, 8 of 392 do not."""
    bands = -(-pixels // PIXEL_BAND)
    for more in range(workers):
        if (images * (bands + more)) % workers == 0:
            return -(-pixels // (bands + more))
    return -(-pixels // bands)


register("int8_lrn", QLinearLRNKernel, when=when_lrn)

__all__ = ["QLinearLRNKernel"]
