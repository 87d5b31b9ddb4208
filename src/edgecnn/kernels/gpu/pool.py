"""Pooling on a GPU, device-agnostic: the geometry of the pool kernels (1-D pools as 2-D with height
1), which ops each pool kernel serves, and the support rules."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.gpu.activations import ActivationParams, applies_activation, node_activation
from edgecnn.kernels.gpu.step import Types, Values, is_float32, shape_of
from edgecnn.ops.pool import pool_geometry
from edgecnn.ops.registry import get_op

POOL_KERNELS: Mapping[str, tuple[str, bool]] = {
    "max_pool": ("MaxPool", True),
    "average_pool": ("AveragePool", False),
}
"""Kernel name (without the backend's prefix) -> (op, is_max); each also serves the op's fused form."""


def fused_form(op: str) -> str:
    """The op a pool becomes with a fused activation (MaxPool: FusedMaxPool)."""
    fused = get_op(op).with_activation
    assert fused is not None, op
    return fused


def pool_supported(node: Node, types: Types, values: Values) -> bool:
    """A float32 1-D or 2-D pool, and for a fused pool an activation the device source applies."""
    return is_float32(types[0], (3, 4)) and applies_activation(node)


def global_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0]) and (types[0].rank or 0) >= 3


def pool_args(
    node: Node, x_shape: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[np.int32, ...], tuple[int, int]]:
    """(output shape, POOL_GEOMETRY of the device source, end pads (rows, cols))."""
    geo = pool_geometry(node.attrs, x_shape)
    assert geo.pads is not None
    out_shape = (*x_shape[:2], *geo.out)
    size: tuple[int, ...]
    out: tuple[int, ...]
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begins: tuple[int, ...]
    ends: tuple[int, ...]
    if len(geo.kernel) == 1:
        size, out = (1, x_shape[2]), (1, geo.out[0])
        kernel, strides, dilations = (1, *geo.kernel), (1, *geo.strides), (1, *geo.dilations)
        begins, ends = (0, geo.pads[0]), (0, geo.pads[1])
    else:
        size, out = x_shape[2:], geo.out
        kernel, strides, dilations = geo.kernel, geo.strides, geo.dilations
        begins, ends = geo.pads[:2], geo.pads[2:]
    values = (*size, *out, *kernel, *strides, *begins, *dilations)
    return out_shape, tuple(np.int32(v) for v in values), (int(ends[0]), int(ends[1]))


def average_args(node: Node, ends: tuple[int, int], is_max: bool) -> tuple[np.int32, ...]:
    """The average pool's extra arguments (end pads, count_include_pad); none for max pooling."""
    if is_max:
        return ()
    return np.int32(ends[0]), np.int32(ends[1]), np.int32(node.attrs.count_include_pad)


def pool_activation(node: Node) -> ActivationParams:
    """The activation a fused pool (FusedMaxPool, FusedAveragePool) applies; none for a plain one."""
    return node_activation(node)


def global_shape(types: Types) -> tuple[int, int, tuple[int, ...]]:
    """(planes, elements per plane, output shape) of a global pool."""
    shape = shape_of(types[0])
    return shape[0] * shape[1], int(np.prod(shape[2:])), (*shape[:2], *([1] * (len(shape) - 2)))
