"""BatchNormalization in training mode: normalise with the batch's statistics, update the running ones."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ops.norm import BatchNormalizationAttrs, batch_normalization
from edgecnn.train.registry import Context, Forward, register_grad


def _axes_and_shape(x: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return (0, *range(2, x.ndim)), (1, -1, *([1] * (x.ndim - 2)))


def batch_norm_forward(
    attrs: BatchNormalizationAttrs, inputs: Sequence[np.ndarray | None], ctx: Context
) -> Forward:
    x, scale, bias, mean, var = inputs
    assert x is not None and scale is not None and bias is not None and mean is not None and var is not None
    if not ctx.training:  # evaluation uses the running statistics, exactly like inference
        return Forward((batch_normalization(attrs, x, scale, bias, mean, var),), None)
    axes, shape = _axes_and_shape(x)
    count = x.size // x.shape[1]
    batch_mean = x.mean(axis=axes, dtype=np.float64)
    batch_var = x.var(axis=axes, dtype=np.float64)
    inv_std = 1.0 / np.sqrt(batch_var + attrs.epsilon)
    xhat = ((x - batch_mean.reshape(shape)) * inv_std.reshape(shape)).astype(x.dtype)
    y = xhat * scale.reshape(shape) + bias.reshape(shape)
    m = ctx.bn_momentum
    unbiased = batch_var * count / max(count - 1, 1)
    updates = {
        3: (m * mean + (1 - m) * batch_mean).astype(mean.dtype),
        4: (m * var + (1 - m) * unbiased).astype(var.dtype),
    }
    return Forward((y.astype(x.dtype),), (xhat, inv_std.astype(x.dtype), scale), updates)


def batch_norm_backward(
    attrs: BatchNormalizationAttrs, cache: tuple | None, dy: np.ndarray, needed: Sequence[bool]
) -> list[np.ndarray | None]:
    if cache is None:
        raise ValueError("BatchNormalization backward needs a training-mode forward")
    xhat, inv_std, scale = cache
    axes, shape = _axes_and_shape(dy)
    count = dy.size // dy.shape[1]
    dscale = (dy * xhat).sum(axis=axes)
    dbias = dy.sum(axis=axes)
    dx = None
    if needed[0]:
        dxhat = dy * scale.reshape(shape)
        dx = (inv_std / count).reshape(shape) * (
            count * dxhat
            - dxhat.sum(axis=axes).reshape(shape)
            - xhat * (dxhat * xhat).sum(axis=axes).reshape(shape)
        )
    return [dx, dscale, dbias, None, None]


register_grad("BatchNormalization", batch_norm_forward, batch_norm_backward, differentiable=(0, 1, 2))
