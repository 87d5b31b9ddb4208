"""Conv backward through im2col / col2im (groups, strides, pads, dilations; 2-D and 3-D), and 1-D
convolutions through the compiled loops of conv1d_kernels.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.ops.conv import ConvAttrs, ConvGeometry, conv_geometry, im2col
from edgecnn.train.layers.conv1d_kernels import Conv1dCache, conv1d_backward, conv1d_forward
from edgecnn.train.registry import Context, Forward, register_grad


@dataclass(frozen=True)
class ConvCache:
    cols: np.ndarray  # (G, N * positions, Cg * taps): the unfolded input
    weights: np.ndarray  # (G, Mg, Cg * taps)
    geo: ConvGeometry
    x_shape: tuple[int, ...]
    out: tuple[int, ...]
    has_bias: bool


def unfold(x: np.ndarray, geo: ConvGeometry, groups: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """im2col as one (G, N * positions, Cg * taps) matrix per group."""
    windows, out = im2col(x, geo)
    n, rank = x.shape[0], len(out)
    cols = windows.reshape(n, groups, x.shape[1] // groups, *out, *geo.kernel)
    order = (1, 0, *range(3, 3 + rank), 2, *range(3 + rank, 3 + 2 * rank))
    per_group = x.shape[1] // groups * int(np.prod(geo.kernel))
    return cols.transpose(order).reshape(groups, n * int(np.prod(out)), per_group), out


def fold(cols: np.ndarray, x_shape: tuple[int, ...], geo: ConvGeometry, out: tuple[int, ...]) -> np.ndarray:
    """col2im: the adjoint of ``unfold``; every window position adds its patch back into the input."""
    groups, n, rank = cols.shape[0], x_shape[0], len(out)
    in_per_group = x_shape[1] // groups
    patches = cols.reshape(groups, n, *out, in_per_group, *geo.kernel)
    # (G, N, *out, Cg, *k) -> (N, G, Cg, *out, *k)
    order = (1, 0, 2 + rank, *range(2, 2 + rank), *range(3 + rank, 3 + 2 * rank))
    patches = patches.transpose(order).reshape(n, x_shape[1], *out, *geo.kernel)
    assert geo.pads is not None
    begins, ends = geo.pads[:rank], geo.pads[rank:]
    padded_shape = tuple(s + b + e for s, b, e in zip(x_shape[2:], begins, ends))
    padded = np.zeros((n, x_shape[1], *padded_shape), dtype=cols.dtype)
    for tap in np.ndindex(*geo.kernel):
        target = tuple(
            slice(t * d, t * d + (o - 1) * s + 1, s)
            for t, d, o, s in zip(tap, geo.dilations, out, geo.strides)
        )
        source = (slice(None), slice(None), *([slice(None)] * rank), *tap)
        padded[(slice(None), slice(None), *target)] += patches[source]
    inner = tuple(slice(b, b + s) for b, s in zip(begins, x_shape[2:]))
    return padded[(slice(None), slice(None), *inner)]


def per_group(a: np.ndarray, b: np.ndarray, transpose_b: bool = False) -> np.ndarray:
    """One 2-D BLAS product per group (numpy's stacked matmul is slower for the few, large groups here)."""
    return np.stack([x @ (y.T if transpose_b else y) for x, y in zip(a, b)])


def conv_forward(attrs: ConvAttrs, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    assert x is not None and w is not None
    if x.ndim == 3 and x.dtype in (np.float32, np.float64):
        y1, cache1 = conv1d_forward(attrs, x, w, b)
        return Forward((y1,), cache1)
    geo = conv_geometry(attrs, x.shape, w.shape)
    groups = attrs.group
    cols, out = unfold(x, geo, groups)
    weights = w.reshape(groups, w.shape[0] // groups, -1)
    y = per_group(cols, weights, transpose_b=True)  # (G, N * positions, Mg)
    n, positions = x.shape[0], int(np.prod(out))
    y = y.reshape(groups, n, positions, -1).transpose(1, 0, 3, 2).reshape(n, w.shape[0], *out)
    if b is not None:
        y = y + b.reshape(-1, *([1] * len(out)))
    cache = ConvCache(cols, weights, geo, tuple(x.shape), tuple(out), b is not None)
    return Forward((np.ascontiguousarray(y, dtype=x.dtype),), cache)


def conv_backward(
    attrs: ConvAttrs, cache: ConvCache | Conv1dCache, dy: np.ndarray, needed: Sequence[bool]
) -> list[np.ndarray | None]:
    if isinstance(cache, Conv1dCache):
        dx, dw = conv1d_backward(cache, dy, needed[0])
        return [dx, dw, dy.sum(axis=(0, 2))] if cache.has_bias else [dx, dw]
    groups, n = attrs.group, dy.shape[0]
    m, rank = dy.shape[1], len(cache.out)
    per_group_out = m // groups
    # Both layouts are made C-contiguous: BLAS is several times slower on a transposed long operand.
    dy_rows = (
        dy.reshape(n, groups, per_group_out, -1).transpose(1, 2, 0, 3).reshape(groups, per_group_out, -1)
    )
    dw = per_group(dy_rows, cache.cols)  # (G, Mg, Cg * taps)
    grads: list[np.ndarray | None] = [None, dw.reshape(m, -1, *cache.geo.kernel)]
    if needed[0]:
        dy_cols = (
            dy.reshape(n, groups, per_group_out, -1).transpose(1, 0, 3, 2).reshape(groups, -1, per_group_out)
        )
        grads[0] = fold(per_group(dy_cols, cache.weights), cache.x_shape, cache.geo, cache.out)
    if cache.has_bias:
        grads.append(dy.sum(axis=(0, *range(2, 2 + rank))))
    return grads


register_grad("Conv", conv_forward, conv_backward, differentiable=(0, 1, 2))
