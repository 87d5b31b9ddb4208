"""MaxPool, AveragePool (1-D and 2-D, pads, strides, dilations, ceil_mode, count_include_pad) and
their fused forms with an activation on CUDA, one thread per output, and the global pools as CuPy
reductions. Geometry as the OpenCL backend's."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cuda.array import CudaArray
from edgecnn.kernels.cuda.step import CudaStep, cuda_kernel, device_for_plan, is_float32, shape_of
from edgecnn.kernels.opencl.pool import pool_args, pool_supported
from edgecnn.kernels.opencl.step import NO_ACTIVATION, activation_params

Types = Sequence["TensorType | None"]
Values = Sequence["np.ndarray | None"]


def _pool_step(node: Node, types: Types, is_max: bool) -> CudaStep:
    """One launch of the pool kernel, then, for a fused pool (FusedMaxPool/FusedAveragePool), one of
    the activation kernel over the result, in place."""
    device = device_for_plan()
    out_shape, geometry, (end_h, end_w) = pool_args(node, shape_of(types[0]))
    kernel = "max_pool2d" if is_max else "avg_pool2d"
    extra = () if is_max else (np.int32(end_h), np.int32(end_w), np.int32(node.attrs.count_include_pad))
    code, slope, low, high = activation_params(node.attrs) if node.op.startswith("Fused") else NO_ACTIVATION

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


POOL_KERNELS = {"max_pool": ("MaxPool", True), "average_pool": ("AveragePool", False)}
"""Kernel name (without the backend's prefix) -> (op, is_max); each also serves the op's fused form."""

for _name, (_op, _is_max) in POOL_KERNELS.items():
    cuda_kernel(_op, when=pool_supported, name=f"cuda_{_name}")(_pool_factory(_is_max))
    cuda_kernel(f"Fused{_op}", when=pool_supported, name=f"cuda_fused_{_name}")(_pool_factory(_is_max))


def global_supported(node: Node, types: Types, values: Values) -> bool:
    t = types[0]
    return is_float32(t) and (t.rank or 0) >= 3 and int(np.prod(shape_of(t)[2:])) > 0  # type: ignore[union-attr]


GLOBAL_KERNEL_MAX = 4096
"""Planes of at most this many elements are pooled by one thread each (one launch); larger ones by
CuPy's parallel reductions."""


def _global_pool(node: Node, types: Types, is_max: bool) -> CudaStep:
    device = device_for_plan()
    shape = shape_of(types[0])
    planes, size = shape[0] * shape[1], int(np.prod(shape[2:]))
    out_shape = (*shape[:2], *([1] * (len(shape) - 2)))
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
