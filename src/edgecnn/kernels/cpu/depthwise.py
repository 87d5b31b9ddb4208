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


@numba.njit(parallel=True, cache=True)
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
    batch, channels, height, width = x.shape
    out_channels, kernel_h, kernel_w = weights.shape
    multiplier = out_channels // channels
    out_h, out_w = out.shape[2], out.shape[3]
    for job in numba.prange(batch * out_channels):
        n = job // out_channels
        m = job % out_channels
        c = m // multiplier
        b = bias[m] if has_bias else np.float32(0.0)
        acc = np.empty(out_w, dtype=np.float32)
        for oy in range(out_h):
            acc[:] = b
            for ki in range(kernel_h):
                iy = oy * stride_h - pad_top + ki * dilation_h
                if iy < 0 or iy >= height:
                    continue
                src = x[n, c, iy]
                for kj in range(kernel_w):
                    w = weights[m, ki, kj]
                    x_offset = kj * dilation_w - pad_left
                    lo, hi = valid_range(x_offset, stride_w, width, out_w)
                    if stride_w == 1:
                        for ox in range(lo, hi):
                            acc[ox] += w * src[ox + x_offset]
                    else:
                        for ox in range(lo, hi):
                            acc[ox] += w * src[ox * stride_w + x_offset]
            dest = out[n, m, oy]
            if kind == 0:
                dest[:] = acc
            else:
                for ox in range(out_w):
                    dest[ox] = activate(acc[ox], kind, alpha, low, high)
