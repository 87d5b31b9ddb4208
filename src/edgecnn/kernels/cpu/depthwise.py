"""Direct depthwise 2-D convolution (one filter per channel): GEMM would waste its work on a
1-row matrix, so loop directly, parallel over (image, channel), with the epilogue fused."""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.epilogue import activate


@numba.njit(parallel=True, cache=True)
def depthwise_conv_2d(
    x: np.ndarray,  # (N, C, H, W)
    weights: np.ndarray,  # (C, KH, KW)
    bias: np.ndarray,  # (C,)
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
    out: np.ndarray,  # (N, C, OH, OW), written
) -> None:
    batch, channels, height, width = x.shape
    kernel_h, kernel_w = weights.shape[1], weights.shape[2]
    out_h, out_w = out.shape[2], out.shape[3]
    for job in numba.prange(batch * channels):
        n = job // channels
        c = job % channels
        b = bias[c] if has_bias else 0.0
        for oy in range(out_h):
            for ox in range(out_w):
                acc = 0.0
                for ki in range(kernel_h):
                    iy = oy * stride_h - pad_top + ki * dilation_h
                    if iy < 0 or iy >= height:
                        continue
                    for kj in range(kernel_w):
                        ix = ox * stride_w - pad_left + kj * dilation_w
                        if 0 <= ix < width:
                            acc += x[n, c, iy, ix] * weights[c, ki, kj]
                out[n, c, oy, ox] = activate(acc + b, kind, alpha, low, high)
