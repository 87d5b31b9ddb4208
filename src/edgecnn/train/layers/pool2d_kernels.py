"""Compiled 2-D max pooling for training: the forward records each window's arg-max (first maximum in
row-major window order, like numpy's argmax), the backward adds the gradient there. The numpy path
in pool.py builds a (N, C, OH, OW, kh*kw) window tensor instead, which costs more than the pooling."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def max_pool2d_forward(
    x: np.ndarray,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int],
    begins: tuple[int, int],
    out: tuple[int, int],
) -> tuple[np.ndarray, np.ndarray]:
    n, c, h, w = x.shape
    y = np.empty((n, c, out[0], out[1]), x.dtype)
    winner = np.empty((n, c, out[0], out[1]), np.int64)  # flat index into the (h, w) plane
    for i in range(n):
        for j in range(c):
            for oh in range(out[0]):
                for ow in range(out[1]):
                    best = -np.inf
                    where = -1
                    for kh in range(kernel[0]):
                        row = oh * strides[0] + kh * dilations[0] - begins[0]
                        if row < 0 or row >= h:
                            continue
                        for kw in range(kernel[1]):
                            col = ow * strides[1] + kw * dilations[1] - begins[1]
                            if col < 0 or col >= w:
                                continue
                            value = x[i, j, row, col]
                            if value > best or where < 0:
                                best = value
                                where = row * w + col
                    y[i, j, oh, ow] = best
                    winner[i, j, oh, ow] = where
    return y, winner


@numba.njit(cache=True, nogil=True)
def max_pool2d_backward(dy: np.ndarray, winner: np.ndarray, h: int, w: int) -> np.ndarray:
    n, c, oh, ow = dy.shape
    dx = np.zeros((n, c, h * w), dy.dtype)
    for i in range(n):
        for j in range(c):
            for a in range(oh):
                for b in range(ow):
                    where = winner[i, j, a, b]
                    if where >= 0:
                        dx[i, j, where] += dy[i, j, a, b]
    return dx.reshape(n, c, h, w)
