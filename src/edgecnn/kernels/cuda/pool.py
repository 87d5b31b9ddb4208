"""MaxPool, AveragePool (1-D and 2-D, pads, strides, dilations, ceil_mode, count_include_pad) and
their fused forms with an activation on CUDA, one thread per output, and the global pools as one
kernel or CuPy reductions. Geometry in kernels.gpu.pool."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.cuda.array import CudaArray
from edgecnn.kernels.cuda.step import CudaStep, cuda_kernel, device_for_plan
from edgecnn.kernels.gpu import pool as gpu_pool
from edgecnn.kernels.gpu.pool import (
    POOL_KERNELS,
    average_args,
    fused_form,
    global_shape,
    pool_activation,
    pool_args,
    pool_supported,
)
from edgecnn.kernels.gpu.step import Types, Values, shape_of


def _pool_step(node: Node, types: Types, is_max: bool) -> CudaStep:
    """One launch of the pool kernel, then, for a fused pool (FusedMaxPool/FusedAveragePool), one of
    the activation kernel over the result, in place."""
    device = device_for_plan()
    out_shape, geometry, ends = pool_args(node, shape_of(types[0]))
    kernel = "max_pool2d" if is_max else "avg_pool2d"
    extra = average_args(node, ends, is_max)
    code, slope, low, high = pool_activation(node)

    def launch(x: CudaArray) -> CudaArray:
        y = CudaArray.empty(device, out_shape)
        device.launch(kernel, y.size, x.array, y.array, *geometry, *extra)
        if code != 0:
            device.launch("activation", y.size, y.array, y.array, code, slope, low, high)
        return y

    return CudaStep(device, launch, (0,))


def _pool_factory(is_max: bool) -> Callable[[Node, Types, Values], CudaStep]:
    def factory(node: Node, types: Types, values: Values) -> CudaStep:
        return _pool_step(node, types, is_max)

    return factory


for _name, (_op, _is_max) in POOL_KERNELS.items():
    cuda_kernel(_op, when=pool_supported, name=f"cuda_{_name}")(_pool_factory(_is_max))
    cuda_kernel(fused_form(_op), when=pool_supported, name=f"cuda_fused_{_name}")(_pool_factory(_is_max))


def global_supported(node: Node, types: Types, values: Values) -> bool:
    """kernels.gpu.pool's rule, and planes that are not empty (the CuPy reductions need an element)."""
    return gpu_pool.global_supported(node, types, values) and int(np.prod(shape_of(types[0])[2:])) > 0


GLOBAL_KERNEL_MAX = 4096
"""Planes of at most this many elements are pooled by one thread each (one launch); larger ones by
CuPy's parallel reductions."""


def _global_pool(node: Node, types: Types, is_max: bool) -> CudaStep:
    device = device_for_plan()
    planes, size, out_shape = global_shape(types)
    flag = np.int32(is_max)

    def launch(x: CudaArray) -> CudaArray:
        if size <= GLOBAL_KERNEL_MAX:
            y = CudaArray.empty(device, out_shape)
            device.launch("global_pool", planes, x.array, y.array, np.int32(size), flag)
            return y
        flat = x.array.reshape(planes, size)
        pooled = flat.max(axis=1) if is_max else flat.mean(axis=1)
        return CudaArray(device, pooled.astype(device.cupy.float32, copy=False).reshape(out_shape))

    return CudaStep(device, launch, (0,))


@cuda_kernel("GlobalAveragePool", when=global_supported, name="cuda_global_average_pool")
def cuda_global_average_pool(node: Node, types: Types, values: Values) -> CudaStep:
    return _global_pool(node, types, is_max=False)


@cuda_kernel("GlobalMaxPool", when=global_supported, name="cuda_global_max_pool")
def cuda_global_max_pool(node: Node, types: Types, values: Values) -> CudaStep:
    return _global_pool(node, types, is_max=True)
