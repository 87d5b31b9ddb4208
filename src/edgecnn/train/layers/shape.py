"""Backward of the layers that only move or mask values: Dropout, Flatten, Reshape, Identity."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ops.shape import FlattenAttrs, ReshapeAttrs, flatten, reshape
from edgecnn.train.registry import Context, Forward, register_grad


def dropout_forward(attrs: object, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    """Inverted dropout: zero a ``ratio`` share of activations at random, scale the rest by
    1 / (1 - ratio), so inference (the identity) needs no rescaling."""
    x = inputs[0]
    assert x is not None
    ratio_input = inputs[1] if len(inputs) > 1 else None
    ratio = 0.5 if ratio_input is None else float(np.asarray(ratio_input).reshape(-1)[0])
    if not 0.0 <= ratio < 1.0:
        raise ValueError(f"dropout ratio must be in [0, 1), got {ratio}")
    if not ctx.training or ratio == 0.0:
        keep = np.ones(x.shape, dtype=bool)
        return Forward((x, keep), (keep, x.dtype.type(1)))
    keep = ctx.rng.random(x.shape) >= ratio
    factor = x.dtype.type(1.0 / (1.0 - ratio))
    return Forward((np.where(keep, x * factor, np.zeros((), x.dtype)), keep), (keep, factor))


def dropout_backward(attrs: object, cache: tuple, dy: np.ndarray, needed: Sequence[bool]) -> list:
    keep, factor = cache
    return [np.where(keep, dy * factor, np.zeros((), dy.dtype))]


register_grad("Dropout", dropout_forward, dropout_backward)


def _reshape_back(attrs: object, shape: tuple[int, ...], dy: np.ndarray, needed: Sequence[bool]) -> list:
    return [dy.reshape(shape), None]


def flatten_forward(attrs: FlattenAttrs, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    x = inputs[0]
    assert x is not None
    return Forward((flatten(attrs, x),), x.shape)


def reshape_forward(attrs: ReshapeAttrs, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    x, target = inputs[0], inputs[1]
    assert x is not None and target is not None
    return Forward((reshape(attrs, x, target),), x.shape)


def identity_forward(attrs: object, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    x = inputs[0]
    assert x is not None
    return Forward((x,), x.shape)


register_grad("Flatten", flatten_forward, _reshape_back)
register_grad("Reshape", reshape_forward, _reshape_back)
register_grad("Identity", identity_forward, _reshape_back)
