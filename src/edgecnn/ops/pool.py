"""Pooling: max and average over windows (1-D/2-D/3-D), and their global forms."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import TensorType
from edgecnn.ops.common import AutoPad, check, first_type, shown
from edgecnn.ops.registry import NoAttrs, register_op
from edgecnn.ops.spatial import output_dims, pad_spatial, resolve_pads, sliding_windows, spatial_defaults
from edgecnn.ops.traits import broadcast_per_image


@dataclass(frozen=True)
class MaxPoolAttrs:
    kernel_shape: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    pads: tuple[int, ...] = ()
    dilations: tuple[int, ...] = ()
    ceil_mode: bool = False
    auto_pad: AutoPad = AutoPad.NOTSET


@dataclass(frozen=True)
class AveragePoolAttrs:
    kernel_shape: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    pads: tuple[int, ...] = ()
    dilations: tuple[int, ...] = ()
    ceil_mode: bool = False
    count_include_pad: bool = False
    auto_pad: AutoPad = AutoPad.NOTSET


PoolAttrs = MaxPoolAttrs | AveragePoolAttrs


@dataclass(frozen=True)
class PoolGeometry:
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...] | None
    out: tuple


def pool_geometry(attrs: PoolAttrs, x_shape: Sequence) -> PoolGeometry:
    rank = len(x_shape) - 2
    check(rank >= 1, f"input must be (N, C, spatial...), got rank {len(x_shape)}")
    kernel = tuple(attrs.kernel_shape)
    check(len(kernel) == rank, f"kernel_shape {shown(kernel)} does not match {rank} spatial dims")
    check(all(k >= 1 for k in kernel), f"kernel_shape {shown(kernel)} is invalid")
    strides, dilations, pads = spatial_defaults(rank, attrs.strides, attrs.dilations, attrs.pads)
    resolved = resolve_pads(attrs.auto_pad, x_shape[2:], kernel, strides, dilations, pads)
    if resolved is not None:
        for i, k in enumerate(kernel):
            span = (k - 1) * dilations[i] + 1
            check(
                resolved[i] < span and resolved[i + rank] < span,
                f"pads {list(resolved)} must be smaller than the window extent {span}",
            )
    out = output_dims(x_shape[2:], kernel, strides, dilations, resolved, attrs.ceil_mode)
    return PoolGeometry(kernel, strides, dilations, resolved, out)


def infer_pool(attrs: PoolAttrs, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    x = first_type(types)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    geo = pool_geometry(attrs, x.shape)
    return [TensorType(x.dtype, (*x.shape[:2], *geo.out))]


def padded_windows(x: np.ndarray, geo: PoolGeometry, value: float | int) -> np.ndarray:
    """(N, C, *out, *kernel) windows over x padded by ``value`` (also past the end for ceil_mode)."""
    rank = len(geo.kernel)
    assert geo.pads is not None
    ends = [
        max((o - 1) * s + (k - 1) * d + 1 - (i + b), e)
        for o, s, k, d, i, b, e in zip(
            geo.out, geo.strides, geo.kernel, geo.dilations, x.shape[2:], geo.pads[:rank], geo.pads[rank:]
        )
    ]
    padded = pad_spatial(x, geo.pads[:rank], ends, value)
    return sliding_windows(padded, geo.kernel, geo.strides, geo.dilations, geo.out)


def _window_axes(rank: int) -> tuple[int, ...]:
    return tuple(range(2 + rank, 2 + 2 * rank))


@register_op(
    "MaxPool",
    attrs=MaxPoolAttrs,
    infer=infer_pool,
    with_activation="FusedMaxPool",
    per_sample=broadcast_per_image,
)
def max_pool(attrs: MaxPoolAttrs, x: np.ndarray) -> np.ndarray:
    geo = pool_geometry(attrs, x.shape)
    lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    windows = padded_windows(x, geo, lowest)
    return np.asarray(windows.max(axis=_window_axes(len(geo.kernel))), order="C")


@register_op(
    "AveragePool",
    attrs=AveragePoolAttrs,
    infer=infer_pool,
    with_activation="FusedAveragePool",
    per_sample=broadcast_per_image,
)
def average_pool(attrs: AveragePoolAttrs, x: np.ndarray) -> np.ndarray:
    """The divisor counts the input positions, plus the explicit pads if count_include_pad
    (never the extra positions that ceil_mode adds past the end)."""
    geo = pool_geometry(attrs, x.shape)
    rank = len(geo.kernel)
    assert geo.pads is not None
    axes = _window_axes(rank)
    total = padded_windows(x.astype(np.float64 if x.dtype == np.float64 else np.float32), geo, 0).sum(
        axis=axes
    )
    ones = np.ones((1, 1, *x.shape[2:]), np.float32)
    if attrs.count_include_pad:
        ones = pad_spatial(ones, geo.pads[:rank], geo.pads[rank:], 1)
        inner = PoolGeometry(geo.kernel, geo.strides, geo.dilations, (0,) * (2 * rank), geo.out)
        counts = padded_windows(ones, inner, 0).sum(axis=axes)
    else:
        counts = padded_windows(ones, geo, 0).sum(axis=axes)
    return np.asarray((total / counts).astype(x.dtype), order="C")


def infer_global(attrs: object, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    x = first_type(types)
    if x.shape is None:
        return [x]
    check(len(x.shape) >= 3, f"input must be (N, C, spatial...), got {x}")
    return [TensorType(x.dtype, (*x.shape[:2], *([1] * (len(x.shape) - 2))))]


@register_op("GlobalAveragePool", infer=infer_global, per_sample=broadcast_per_image)
def global_average_pool(attrs: NoAttrs, x: np.ndarray) -> np.ndarray:
    return x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)


@register_op("GlobalMaxPool", infer=infer_global, per_sample=broadcast_per_image)
def global_max_pool(attrs: NoAttrs, x: np.ndarray) -> np.ndarray:
    return x.max(axis=tuple(range(2, x.ndim)), keepdims=True)
