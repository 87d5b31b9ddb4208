"""Fully connected backward: Gemm (alpha, beta, transposes, broadcast C) and MatMul."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ops.dense import GemmAttrs, gemm
from edgecnn.train.registry import Context, Forward, register_grad, unbroadcast


def gemm_forward(attrs: GemmAttrs, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    y = gemm(attrs, a, b, c)
    return Forward((y,), (a, b, None if c is None else c.shape))


def gemm_backward(
    attrs: GemmAttrs, cache: tuple, dy: np.ndarray, needed: Sequence[bool]
) -> list[np.ndarray | None]:
    a, b, c_shape = cache
    scaled = dy * dy.dtype.type(attrs.alpha) if attrs.alpha != 1.0 else dy
    a_used = a.T if attrs.trans_a else a  # (M, K)
    b_used = b.T if attrs.trans_b else b  # (K, N)
    grads: list[np.ndarray | None] = [None, None]
    if needed[0]:
        da = scaled @ b_used.T
        grads[0] = da.T if attrs.trans_a else da
    db = a_used.T @ scaled
    grads[1] = db.T if attrs.trans_b else db
    if c_shape is not None:
        dc = unbroadcast(dy, c_shape)
        grads.append(dc * dc.dtype.type(attrs.beta) if attrs.beta != 1.0 else dc)
    return grads


register_grad("Gemm", gemm_forward, gemm_backward, differentiable=(0, 1, 2))


def matmul_forward(attrs: object, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    a, b = inputs[0], inputs[1]
    assert a is not None and b is not None
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError("training supports MatMul of operands with rank >= 2 only")
    return Forward((np.matmul(a, b),), (a, b))


def matmul_backward(
    attrs: object, cache: tuple, dy: np.ndarray, needed: Sequence[bool]
) -> list[np.ndarray | None]:
    a, b = cache
    da = unbroadcast(np.matmul(dy, np.swapaxes(b, -1, -2)), a.shape) if needed[0] else None
    db = unbroadcast(np.matmul(np.swapaxes(a, -1, -2), dy), b.shape) if needed[1] else None
    return [da, db]


register_grad("MatMul", matmul_forward, matmul_backward, differentiable=(0, 1))


def add_forward(attrs: object, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    a, b = inputs[0], inputs[1]
    assert a is not None and b is not None
    return Forward((np.asarray(a + b, dtype=a.dtype),), (a.shape, b.shape))


def add_backward(
    attrs: object, cache: tuple, dy: np.ndarray, needed: Sequence[bool]
) -> list[np.ndarray | None]:
    return [unbroadcast(dy, shape) if need else None for shape, need in zip(cache, needed)]


register_grad("Add", add_forward, add_backward, differentiable=(0, 1))
