"""Direct depthwise 2-D convolution (each input channel convolved by its own filters): GEMM would
waste its work on 1-row matrices, so loop directly, parallel over (image, output channel).

Output channel m reads input channel m // multiplier (multiplier = C_out / C_in, 1 for MobileNet).
Each output row is accumulated tap by tap over whole rows, the padded columns cut off once per tap,
so the inner loop is a branch-free multiply-add the compiler vectorises; the epilogue is fused.
"""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.epilogue import activate
from edgecnn.kernels.cpu.im2col import valid_range


@numba.njit(cache=True)
def _depthwise_plane(
    src: np.ndarray,  # (H, W): the input channel
    weights: np.ndarray,  # (KH, KW): the output channel's filter
    bias: float,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    dilation_h: int,
    tap_lo: np.ndarray,  # per kernel column: first output column whose input column exists
    tap_hi: np.ndarray,  # ... and the end of that range
    tap_start: np.ndarray,  # input column read by output column tap_lo
    kind: int,
    alpha: float,
    low: float,
    high: float,
    dest: np.ndarray,  # (OH, OW), written
) -> None:
    """One output channel of one image. Loops run over views from index 0, so numba needs no
    negative-index checks and the multiply-adds vectorise."""
    height = src.shape[0]
    kernel_h, kernel_w = weights.shape
    out_h, out_w = dest.shape
    acc = np.empty(out_w, dtype=np.float32)
    for oy in range(out_h):
        for i in range(out_w):
            acc[i] = bias
        for ki in range(kernel_h):
            iy = oy * stride_h - pad_top + ki * dilation_h
            if iy < 0 or iy >= height:
                continue
            row = src[iy]
            for kj in range(kernel_w):
                count = tap_hi[kj] - tap_lo[kj]
                if count <= 0:
                    continue
                w = weights[ki, kj]
                target = acc[tap_lo[kj] : tap_hi[kj]]
                start = tap_start[kj]
                if stride_w == 1:
                    values = row[start : start + count]
                    for i in range(count):
                        target[i] += w * values[i]
                else:
                    strided = row[start : start + (count - 1) * stride_w + 1 : stride_w]
                    for i in range(count):
                        target[i] += w * strided[i]
        out = dest[oy]
        if kind == 0:
            for i in range(out_w):
                out[i] = acc[i]
        else:
            for i in range(out_w):
                out[i] = activate(acc[i], kind, alpha, low, high)


@numba.njit(parallel=True, nogil=True, cache=True)
def depthwise_conv_2d(
    x: np.ndarray,  # (N, C, H, W)
    weights: np.ndarray,  # (M, KH, KW), M = C * multiplier
    bias: np.ndarray,  # (M,)
    has_bias: bool,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    batch, channels, _, width = x.shape
    out_channels, _, kernel_w = weights.shape
    multiplier = out_channels // channels
    out_w = out.shape[3]
    tap_lo = np.empty(kernel_w, dtype=np.int64)
    tap_hi = np.empty(kernel_w, dtype=np.int64)
    tap_start = np.empty(kernel_w, dtype=np.int64)
    for kj in range(kernel_w):
        offset = kj * dilation_w - pad_left
        tap_lo[kj], tap_hi[kj] = valid_range(offset, stride_w, width, out_w)
        tap_start[kj] = tap_lo[kj] * stride_w + offset
    for job in numba.prange(batch * out_channels):
        n, m = job // out_channels, job % out_channels
        _depthwise_plane(
            x[n, m // multiplier],
            weights[m],
            bias[m] if has_bias else np.float32(0.0),
            stride_h,
            stride_w,
            pad_top,
            dilation_h,
            tap_lo,
            tap_hi,
            tap_start,
            kind,
            alpha,
            low,
            high,
            out[n, m],
        )
