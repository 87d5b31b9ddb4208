"""LRN across channels (a CUDA kernel) and Softmax (CuPy reductions) on CUDA."""

from __future__ import annotations

from edgecnn.ir.graph import Node
from edgecnn.kernels.cuda.array import CudaArray
from edgecnn.kernels.cuda.step import CudaStep, cuda_kernel, device_for_plan
from edgecnn.kernels.gpu.norm import lrn_params, lrn_supported, softmax_lines, softmax_supported
from edgecnn.kernels.gpu.step import Types, Values, shape_of


@cuda_kernel("LRN", when=lrn_supported, name="cuda_lrn")
def cuda_lrn(node: Node, types: Types, values: Values) -> CudaStep:
    device = device_for_plan()
    shape = shape_of(types[0])
    params = lrn_params(node, shape)

    def launch(x: CudaArray) -> CudaArray:
        y = CudaArray.empty(device, shape)
        device.launch("lrn", y.size, x.array, y.array, *params)
        return y

    return CudaStep(device, launch, (0,))


@cuda_kernel("Softmax", when=softmax_supported, name="cuda_softmax")
def cuda_softmax(node: Node, types: Types, values: Values) -> CudaStep:
    """The tensor seen as (outer, L, inner), normalised along L (kernels.gpu.norm.softmax_lines)."""
    device = device_for_plan()
    cupy = device.cupy
    shape = shape_of(types[0])
    outer, length, inner = softmax_lines(node, types)

    def launch(x: CudaArray) -> CudaArray:
        if x.size == 0:
            return CudaArray.empty(device, shape)
        lines = x.array.reshape(outer, length, inner)
        e = cupy.exp(lines - lines.max(axis=1, keepdims=True))
        e /= e.sum(axis=1, keepdims=True)
        return CudaArray(device, cupy.ascontiguousarray(e, dtype=cupy.float32).reshape(shape))

    return CudaStep(device, launch, (0,))
