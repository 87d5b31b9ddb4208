"""Compiled 1-D max and average pooling for training ((N, C, L) tensors, seed 003's radar network):
the forwards keep what the backwards need (max: each window's arg-max, the first maximum as numpy's
argmax picks it; average: nothing but the divisors), the backwards add each output's gradient back
onto its window's input positions. The numpy path in pool.py builds an (N, C, out, taps) window
tensor and scatters it back tap by tap, which costs many times the pooling itself."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def max_pool1d_forward(
    x: np.ndarray, taps: int, stride: int, dilation: int, pad_begin: int, out_length: int
) -> tuple[np.ndarray, np.ndarray]:
    """(y, winner): winner is the input position of each output's maximum (-1: no tap inside)."""
    n, c, length = x.shape
    y = np.empty((n, c, out_length), x.dtype)
    winner = np.empty((n, c, out_length), np.int64)
    for i in range(n):
        for j in range(c):
            for o in range(out_length):
                best = -np.inf
                where = -1
                for t in range(taps):
                    at = o * stride + t * dilation - pad_begin
                    if 0 <= at < length:
                        value = x[i, j, at]
                        if value > best or where < 0 or (value != value and best == best):
                            best = value
                            where = at
                y[i, j, o] = best
                winner[i, j, o] = where
    return y, winner


@numba.njit(cache=True, nogil=True)
def max_pool1d_backward(dy: np.ndarray, winner: np.ndarray, length: int) -> np.ndarray:
    n, c, out_length = dy.shape
    dx = np.zeros((n, c, length), dy.dtype)
    for i in range(n):
        for j in range(c):
            for o in range(out_length):
                where = winner[i, j, o]
                if where >= 0:
                    dx[i, j, where] += dy[i, j, o]
    return dx


@numba.njit(cache=True, nogil=True)
def average_pool1d_forward(
    x: np.ndarray, taps: int, stride: int, dilation: int, pad_begin: int, counts: np.ndarray
) -> np.ndarray:
    """Sums of the taps inside the input, divided by ``counts`` (one divisor per output position)."""
    n, c, length = x.shape
    out_length = counts.shape[0]
    y = np.empty((n, c, out_length), x.dtype)
    for i in range(n):
        for j in range(c):
            for o in range(out_length):
                total = x.dtype.type(0)
                for t in range(taps):
                    at = o * stride + t * dilation - pad_begin
                    if 0 <= at < length:
                        total += x[i, j, at]
                y[i, j, o] = total / counts[o]
    return y


@numba.njit(cache=True, nogil=True)
def average_pool1d_backward(
    dy: np.ndarray, taps: int, stride: int, dilation: int, pad_begin: int, counts: np.ndarray, length: int
) -> np.ndarray:
    n, c, out_length = dy.shape
    dx = np.zeros((n, c, length), dy.dtype)
    for i in range(n):
        for j in range(c):
            for o in range(out_length):
                share = dy[i, j, o] / counts[o]
                for t in range(taps):
                    at = o * stride + t * dilation - pad_begin
                    if 0 <= at < length:
                        dx[i, j, at] += share
    return dx
