"""Pooling with an elementwise activation applied to its output, which the pass
fuse_activation creates from act(pool(x)): the activation runs while the kernel writes each
pooled value instead of as a second step over the whole tensor. Exact for every activation, since
it is applied after pooling as before. Their reference kernels are the two ops in sequence."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgecnn.ops.fused import FusedActivation
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs, average_pool, infer_pool, max_pool
from edgecnn.ops.registry import register_op
from edgecnn.ops.traits import broadcast_per_image


@dataclass(frozen=True)
class FusedMaxPoolAttrs(MaxPoolAttrs, FusedActivation):
    """MaxPool attributes plus the activation applied to its output."""


@dataclass(frozen=True)
class FusedAveragePoolAttrs(AveragePoolAttrs, FusedActivation):
    """AveragePool attributes plus the activation applied to its output."""


@register_op(
    "FusedMaxPool",
    attrs=FusedMaxPoolAttrs,
    infer=infer_pool,
    family="MaxPool",
    with_activation="FusedMaxPool",
    per_sample=broadcast_per_image,
)
def fused_max_pool(attrs: FusedMaxPoolAttrs, x: np.ndarray) -> np.ndarray:
    return attrs.apply(max_pool(attrs, x))


@register_op(
    "FusedAveragePool",
    attrs=FusedAveragePoolAttrs,
    infer=infer_pool,
    family="AveragePool",
    with_activation="FusedAveragePool",
    per_sample=broadcast_per_image,
)
def fused_average_pool(attrs: FusedAveragePoolAttrs, x: np.ndarray) -> np.ndarray:
    return attrs.apply(average_pool(attrs, x))
