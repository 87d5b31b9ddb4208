"""Pooling backward: max routes each gradient to its window's arg-max, average spreads it evenly."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ops.pool import (
    AveragePoolAttrs,
    MaxPoolAttrs,
    PoolGeometry,
    average_pool,
    padded_windows,
    pool_geometry,
)
from edgecnn.ops.spatial import pad_spatial
from edgecnn.train.layers.pool1d_kernels import (
    average_pool1d_backward,
    average_pool1d_forward,
    max_pool1d_backward,
    max_pool1d_forward,
)
from edgecnn.train.layers.pool2d_kernels import max_pool2d_backward, max_pool2d_forward
from edgecnn.train.registry import Context, Forward, register_grad


def padded_extent(x_shape: Sequence[int], geo: PoolGeometry) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Begin and end padding that ``padded_windows`` applies (ceil_mode may read past the end)."""
    rank = len(geo.kernel)
    assert geo.pads is not None
    ends = tuple(
        max((o - 1) * s + (k - 1) * d + 1 - (i + b), e)
        for o, s, k, d, i, b, e in zip(
            geo.out, geo.strides, geo.kernel, geo.dilations, x_shape[2:], geo.pads[:rank], geo.pads[rank:]
        )
    )
    return tuple(geo.pads[:rank]), ends


def scatter_taps(per_tap: np.ndarray, x_shape: Sequence[int], geo: PoolGeometry) -> np.ndarray:
    """Add a (N, C, *out, *kernel) array of per-window-tap gradients back onto the input positions."""
    begins, ends = padded_extent(x_shape, geo)
    padded = np.zeros(
        (*x_shape[:2], *(s + b + e for s, b, e in zip(x_shape[2:], begins, ends))), dtype=per_tap.dtype
    )
    for tap in np.ndindex(*geo.kernel):
        target = tuple(
            slice(t * d, t * d + (o - 1) * s + 1, s)
            for t, d, o, s in zip(tap, geo.dilations, geo.out, geo.strides)
        )
        padded[(slice(None), slice(None), *target)] += per_tap[(Ellipsis, *tap)]
    inner = tuple(slice(b, b + s) for b, s in zip(begins, x_shape[2:]))
    return padded[(slice(None), slice(None), *inner)]


def _line(geo: PoolGeometry) -> tuple[int, int, int, int]:
    """(taps, stride, dilation, begin padding) of a 1-D pooling's geometry."""
    assert geo.pads is not None
    return geo.kernel[0], geo.strides[0], geo.dilations[0], geo.pads[0]


def _pair(values: Sequence[int]) -> tuple[int, int]:
    """The two spatial values of a 2-D pooling's geometry."""
    return values[0], values[1]


def max_pool_forward(attrs: MaxPoolAttrs, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    x = inputs[0]
    assert x is not None
    geo = pool_geometry(attrs, x.shape)
    assert geo.pads is not None
    if x.ndim == 4 and x.dtype.kind == "f":
        begins = (geo.pads[0], geo.pads[1])
        y, winner = max_pool2d_forward(
            x, _pair(geo.kernel), _pair(geo.strides), _pair(geo.dilations), begins, tuple(geo.out)
        )
        return Forward((y,), ("compiled", winner, geo, x.shape))
    if x.ndim == 3 and x.dtype.kind == "f":
        y, winner = max_pool1d_forward(x, *_line(geo), int(geo.out[0]))
        return Forward((y,), ("compiled_1d", winner, geo, x.shape))
    windows = padded_windows(x, geo, -np.inf)
    flat = windows.reshape(*windows.shape[: 2 + len(geo.kernel)], -1)
    winner = flat.argmax(axis=-1)
    y = np.take_along_axis(flat, winner[..., None], axis=-1)[..., 0]
    return Forward((np.ascontiguousarray(y),), ("windows", winner, geo, x.shape))


def max_pool_backward(
    attrs: MaxPoolAttrs, cache: tuple, dy: np.ndarray, needed: Sequence[bool]
) -> list[np.ndarray | None]:
    path, winner, geo, x_shape = cache
    if path == "compiled":
        return [max_pool2d_backward(np.ascontiguousarray(dy), winner, x_shape[2], x_shape[3])]
    if path == "compiled_1d":
        return [max_pool1d_backward(np.ascontiguousarray(dy), winner, x_shape[2])]
    taps = int(np.prod(geo.kernel))
    one_hot = winner[..., None] == np.arange(taps)
    per_tap = (one_hot * dy[..., None]).reshape(*dy.shape, *geo.kernel)
    return [scatter_taps(per_tap.astype(dy.dtype, copy=False), x_shape, geo)]


register_grad("MaxPool", max_pool_forward, max_pool_backward)


def window_counts(attrs: AveragePoolAttrs, x_shape: Sequence[int], geo: PoolGeometry) -> np.ndarray:
    """The divisor of every output position, as the forward op computes it."""
    rank = len(geo.kernel)
    assert geo.pads is not None
    axes = tuple(range(2 + rank, 2 + 2 * rank))
    ones = np.ones((1, 1, *x_shape[2:]), np.float64)
    if attrs.count_include_pad:
        ones = pad_spatial(ones, geo.pads[:rank], geo.pads[rank:], 1)
        inner = PoolGeometry(geo.kernel, geo.strides, geo.dilations, (0,) * (2 * rank), geo.out)
        return padded_windows(ones, inner, 0).sum(axis=axes)
    return padded_windows(ones, geo, 0).sum(axis=axes)


def average_pool_forward(
    attrs: AveragePoolAttrs, inputs: Sequence[np.ndarray | None], ctx: Context
) -> Forward:
    x = inputs[0]
    assert x is not None
    geo = pool_geometry(attrs, x.shape)
    if x.ndim == 3 and x.dtype.kind == "f":
        counts = window_counts(attrs, x.shape, geo).reshape(-1)
        return Forward((average_pool1d_forward(x, *_line(geo), counts),), (geo, x.shape, counts))
    return Forward((average_pool(attrs, x),), (geo, x.shape, None))


def average_pool_backward(
    attrs: AveragePoolAttrs, cache: tuple, dy: np.ndarray, needed: Sequence[bool]
) -> list[np.ndarray | None]:
    geo, x_shape, counts = cache
    if counts is not None:
        return [average_pool1d_backward(np.ascontiguousarray(dy), *_line(geo), counts, x_shape[2])]
    share = (dy / window_counts(attrs, x_shape, geo)).astype(dy.dtype)
    per_tap = np.broadcast_to(share.reshape(*share.shape, *([1] * len(geo.kernel))), (*dy.shape, *geo.kernel))
    # Taps in the padding land outside the inner region and are dropped by scatter_taps.
    return [scatter_taps(np.ascontiguousarray(per_tap), x_shape, geo)]


register_grad("AveragePool", average_pool_forward, average_pool_backward)


def global_average_forward(attrs: object, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    x = inputs[0]
    assert x is not None
    return Forward((x.mean(axis=tuple(range(2, x.ndim)), keepdims=True),), x.shape)


def global_average_backward(
    attrs: object, shape: tuple[int, ...], dy: np.ndarray, needed: Sequence[bool]
) -> list[np.ndarray | None]:
    count = int(np.prod(shape[2:]))
    return [np.broadcast_to(dy / dy.dtype.type(count), shape).copy()]


register_grad("GlobalAveragePool", global_average_forward, global_average_backward)
