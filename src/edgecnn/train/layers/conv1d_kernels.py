"""Compiled 1-D convolution for training ((N, C, L) tensors, seed 003's radar network): the forward is
the inference kernel (kernels/cpu/conv/conv1d.py, any float dtype), the backward one pass over the
same taps that accumulates both gradients. The im2col path in conv.py unfolds the input into an
(N * positions, C * taps) matrix and folds the input gradient back tap by tap, which for a few
thousand multiply-adds per sample costs many times the arithmetic."""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from edgecnn.kernels.cpu.conv.conv1d import conv_1d_serial, layout, tap_ranges
from edgecnn.ops.conv import ConvAttrs, conv_geometry
from edgecnn.ops.spatial import output_dims


@dataclass(frozen=True)
class Conv1dCache:
    x: np.ndarray  # (N, C, L), C-contiguous
    w: np.ndarray  # (M, C / group, K), C-contiguous
    geometry: np.ndarray  # int64, as conv_1d reads it
    lo: np.ndarray
    hi: np.ndarray
    has_bias: bool


def conv1d_forward(
    attrs: ConvAttrs, x: np.ndarray, w: np.ndarray, b: np.ndarray | None
) -> tuple[np.ndarray, Conv1dCache]:
    """The convolution's output and what its backward reads."""
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w, x.dtype)
    geo = conv_geometry(attrs, x.shape, w.shape)
    assert geo.pads is not None  # concrete shapes
    (out_length,) = output_dims(x.shape[2:], geo.kernel, geo.strides, geo.dilations, geo.pads)
    assert isinstance(out_length, int)
    kernels, group_channels, taps = w.shape
    stride, dilation, pad = geo.strides[0], geo.dilations[0], geo.pads[0]
    lo, hi = tap_ranges(x.shape[2], out_length, taps, stride, dilation, pad)
    geometry = np.array(
        [x.shape[1], x.shape[2], kernels, group_channels, taps, out_length, stride, dilation, pad, 0],
        np.int64,
    )
    bias = np.zeros(kernels, x.dtype) if b is None else np.ascontiguousarray(b, x.dtype)
    y = np.empty((x.shape[0], kernels, out_length), x.dtype)
    conv_1d_serial(x, w.reshape(-1), bias, lo, hi, geometry, np.zeros(3), 1, y)
    return y, Conv1dCache(x, w, geometry, lo, hi, b is not None)


def conv1d_backward(
    cache: Conv1dCache, dy: np.ndarray, need_input: bool
) -> tuple[np.ndarray | None, np.ndarray]:
    """(d input or None, d weights) for the output gradient ``dy``."""
    dx = np.zeros_like(cache.x)
    dw = np.zeros_like(cache.w)
    _backward(
        cache.x.reshape(-1),
        cache.w.reshape(-1),
        np.ascontiguousarray(dy, cache.x.dtype).reshape(-1),
        cache.geometry,
        cache.lo,
        cache.hi,
        need_input,
        dx.reshape(-1),
        dw.reshape(-1),
    )
    return (dx if need_input else None), dw


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _backward(
    x: np.ndarray,
    w: np.ndarray,
    dy: np.ndarray,
    geometry: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    need_input: bool,
    dx: np.ndarray,
    dw: np.ndarray,
) -> None:
    """Flat arrays as in the forward; dx and dw start at zero. For every (sample, output channel,
    input channel, tap): dw += dy . x over the tap's valid outputs, dx += dy * w there. Reassociating
    the dot product (fastmath) lets LLVM vectorise it; offsets are unsigned for the same reason."""
    channels, length, kernels, group_channels, taps, out_length, stride, dilation, pad = layout(geometry)
    u = np.uint64
    s = u(stride)
    per_group = kernels // (channels // group_channels)
    samples = x.size // (channels * length)
    for n in range(samples):
        for m in range(kernels):
            group = m // per_group
            y0 = u((n * kernels + m) * out_length)
            for c in range(group_channels):
                x0 = (n * channels + group * group_channels + c) * length
                for t in range(taps):
                    if hi[t] <= lo[t]:
                        continue
                    start = u(x0 + lo[t] * stride + t * dilation - pad)
                    at, count = y0 + u(lo[t]), u(hi[t] - lo[t])
                    tap = u((m * group_channels + c) * taps + t)
                    weight = w[tap]
                    total = dw.dtype.type(0)
                    for q in range(count):
                        total += dy[at + q] * x[start + q * s]
                    dw[tap] += total
                    if need_input:
                        for q in range(count):
                            dx[start + q * s] += dy[at + q] * weight
