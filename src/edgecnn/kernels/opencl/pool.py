"""MaxPool, AveragePool (1-D and 2-D, pads, strides, dilations, ceil_mode, count_include_pad), their
fused forms with an activation, and the global pools on OpenCL: one work item per output (per row
on CPU devices). Geometry in kernels.gpu.pool."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.gpu.pool import (
    POOL_KERNELS,
    average_args,
    fused_form,
    global_shape,
    global_supported,
    pool_activation,
    pool_args,
    pool_supported,
)
from edgecnn.kernels.gpu.step import Types, Values, shape_of
from edgecnn.kernels.opencl.array import DeviceArray
from edgecnn.kernels.opencl.runtime import ACTIVATION_KERNELS, OpenCLDevice
from edgecnn.kernels.opencl.step import OpenCLStep, device_for_plan, opencl_kernel


def pool_launch(device: OpenCLDevice, kernel: str, out_shape: tuple[int, ...]) -> tuple[str, int]:
    """(kernel, work items): one work item per output row on CPU devices (see pool.cl), else per output."""
    rows = int(np.prod(out_shape[:-1]))
    return (f"{kernel}_rows", rows) if device.is_cpu else (kernel, rows * out_shape[-1])


def _pool_step(node: Node, types: Types, is_max: bool) -> OpenCLStep:
    """One launch of the pool kernel, then, for a fused pool (FusedMaxPool/FusedAveragePool), one of
    the activation's kernel over the result, in place."""
    device = device_for_plan()
    out_shape, geometry, ends = pool_args(node, shape_of(types[0]))
    kernel, total = pool_launch(device, "max_pool2d" if is_max else "avg_pool2d", out_shape)
    extra = average_args(node, ends, is_max)
    code, slope, low, high = pool_activation(node)
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


for _name, (_op, _is_max) in POOL_KERNELS.items():
    opencl_kernel(_op, when=pool_supported, name=f"opencl_{_name}")(_pool_factory(_is_max))
    opencl_kernel(fused_form(_op), when=pool_supported, name=f"opencl_fused_{_name}")(_pool_factory(_is_max))


def _global_pool(node: Node, types: Types, is_max: bool) -> OpenCLStep:
    device = device_for_plan()
    planes, size, out_shape = global_shape(types)

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
