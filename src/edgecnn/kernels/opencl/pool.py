"""MaxPool, AveragePool (1-D and 2-D, pads, strides, dilations, ceil_mode, count_include_pad), their
fused forms with an activation, and the global pools on OpenCL: one work item per output."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.opencl.array import DeviceArray
from edgecnn.kernels.opencl.conv import ACTIVATION_KERNELS
from edgecnn.kernels.opencl.runtime import OpenCLDevice
from edgecnn.kernels.opencl.step import (
    NO_ACTIVATION,
    OpenCLStep,
    activation_params,
    device_for_plan,
    is_float32,
    opencl_kernel,
    shape_of,
)
from edgecnn.ops.pool import pool_geometry

Types = Sequence["TensorType | None"]
Values = Sequence["np.ndarray | None"]


def pool_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0], (3, 4))


def pool_args(
    node: Node, x_shape: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[np.int32, ...], tuple[int, int]]:
    """(output shape, POOL_GEOMETRY of pool.cl, end pads (rows, cols)); 1-D pools as 2-D with height 1."""
    geo = pool_geometry(node.attrs, x_shape)
    assert geo.pads is not None
    out_shape = (*x_shape[:2], *geo.out)
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


def pool_launch(device: OpenCLDevice, kernel: str, out_shape: tuple[int, ...]) -> tuple[str, int]:
    """(kernel, work items): one work item per output row on CPU devices (see pool.cl), else per output."""
    rows = int(np.prod(out_shape[:-1]))
    return (f"{kernel}_rows", rows) if device.is_cpu else (kernel, rows * out_shape[-1])


def _pool_step(node: Node, types: Types, is_max: bool) -> OpenCLStep:
    """One launch of the pool kernel, then, for a fused pool (FusedMaxPool/FusedAveragePool), one of
    common.cl's activation kernel over the result, in place."""
    device = device_for_plan()
    out_shape, geometry, (end_h, end_w) = pool_args(node, shape_of(types[0]))
    kernel, total = pool_launch(device, "max_pool2d" if is_max else "avg_pool2d", out_shape)
    extra = () if is_max else (np.int32(end_h), np.int32(end_w), np.int32(node.attrs.count_include_pad))
    code, slope, low, high = activation_params(node.attrs) if node.op.startswith("Fused") else NO_ACTIVATION
    activation = ACTIVATION_KERNELS.get(int(code))
    size = int(np.prod(out_shape))

    def launch(x: DeviceArray) -> DeviceArray:
        y = DeviceArray.empty(device, out_shape)
        device.launch_1d(kernel, total, x.buffer, y.buffer, *geometry, *extra)
        if activation is not None:
            device.launch_1d(activation, size, y.buffer, y.buffer, slope, low, high)
        return y

    return OpenCLStep(device, launch, (0,))


def _pool_factory(is_max: bool) -> Callable[[Node, Types, Values], OpenCLStep]:
    def factory(node: Node, types: Types, values: Values) -> OpenCLStep:
        return _pool_step(node, types, is_max)

    return factory


POOL_KERNELS = {"max_pool": ("MaxPool", True), "average_pool": ("AveragePool", False)}
"""Kernel name (without the backend's prefix) -> (op, is_max); each also serves the op's fused form."""

for _name, (_op, _is_max) in POOL_KERNELS.items():
    opencl_kernel(_op, when=pool_supported, name=f"opencl_{_name}")(_pool_factory(_is_max))
    opencl_kernel(f"Fused{_op}", when=pool_supported, name=f"opencl_fused_{_name}")(_pool_factory(_is_max))


def global_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0]) and (types[0].rank or 0) >= 3  # type: ignore[union-attr]


def _global_pool(node: Node, types: Types, is_max: bool) -> OpenCLStep:
    device = device_for_plan()
    shape = shape_of(types[0])
    planes, size = shape[0] * shape[1], int(np.prod(shape[2:]))
    out_shape = (*shape[:2], *([1] * (len(shape) - 2)))

    def launch(x: DeviceArray) -> DeviceArray:
        y = DeviceArray.empty(device, out_shape)
        device.launch_1d("global_pool", planes, x.buffer, y.buffer, np.int32(size), np.int32(is_max))
        return y

    return OpenCLStep(device, launch, (0,))


@opencl_kernel("GlobalAveragePool", when=global_supported, name="opencl_global_average_pool")
def opencl_global_average_pool(node: Node, types: Types, values: Values) -> OpenCLStep:
    return _global_pool(node, types, is_max=False)


@opencl_kernel("GlobalMaxPool", when=global_supported, name="opencl_global_max_pool")
def opencl_global_max_pool(node: Node, types: Types, values: Values) -> OpenCLStep:
    return _global_pool(node, types, is_max=True)
