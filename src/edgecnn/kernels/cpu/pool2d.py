"""Compiled 2-D max and average pooling, parallel over (image, channel) planes."""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.epilogue import activate


@numba.njit(parallel=True, cache=True)
def pool_2d(
    x: np.ndarray,  # (N, C, H, W)
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    is_max: bool,
    count_include_pad: bool,
    pad_bottom: int,
    pad_right: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    out: np.ndarray,  # (N, C, OH, OW), written
) -> None:
    """Windows may run past the padded input (ceil_mode): those taps never count.
    With count_include_pad, average divides by the taps inside the *padded* input."""
    batch, channels, height, width = x.shape
    out_h, out_w = out.shape[2], out.shape[3]
    for job in numba.prange(batch * channels):
        n = job // channels
        c = job % channels
        plane = x[n, c]
        for oy in range(out_h):
            for ox in range(out_w):
                best = -np.inf
                total = 0.0
                count = 0
                padded_count = 0
                for ki in range(kernel_h):
                    iy = oy * stride_h - pad_top + ki * dilation_h
                    inside_padded_y = -pad_top <= iy < height + pad_bottom
                    for kj in range(kernel_w):
                        ix = ox * stride_w - pad_left + kj * dilation_w
                        if inside_padded_y and -pad_left <= ix < width + pad_right:
                            padded_count += 1
                        if 0 <= iy < height and 0 <= ix < width:
                            v = plane[iy, ix]
                            if v > best:
                                best = v
                            total += v
                            count += 1
                if is_max:
                    result = best
                else:
                    divisor = padded_count if count_include_pad else count
                    result = total / divisor if divisor > 0 else 0.0
                out[n, c, oy, ox] = activate(result, kind, alpha, low, high)
