"""LRN across channels (a CUDA kernel) and Softmax (CuPy reductions) on CUDA."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cuda.array import CudaArray
from edgecnn.kernels.cuda.step import CudaStep, cuda_kernel, device_for_plan, is_float32, shape_of
from edgecnn.ops.activation import softmax_axes

Types = Sequence["TensorType | None"]
Values = Sequence["np.ndarray | None"]


def lrn_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0]) and (types[0].rank or 0) >= 2 and node.attrs.size >= 1  # type: ignore[union-attr]


@cuda_kernel("LRN", when=lrn_supported, name="cuda_lrn")
def cuda_lrn(node: Node, types: Types, values: Values) -> CudaStep:
    device = device_for_plan()
    shape = shape_of(types[0])
    channels, spatial = shape[1], int(np.prod(shape[2:]))
    a = node.attrs
    params = (np.int32(channels), np.int32(spatial), np.int32(a.size), np.float32(a.alpha), np.float32(a.beta),
              np.float32(a.bias))  # fmt: skip

    def launch(x: CudaArray) -> CudaArray:
        y = CudaArray.empty(device, shape)
        device.launch("lrn", y.size, x.array, y.array, *params)
        return y

    return CudaStep(device, launch, (0,))


def softmax_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0]) and (types[0].rank or 0) >= 1  # type: ignore[union-attr]


@cuda_kernel("Softmax", when=softmax_supported, name="cuda_softmax")
def cuda_softmax(node: Node, types: Types, values: Values) -> CudaStep:
    """The normalised axes are contiguous (one axis, or all from ``axis`` on), so the tensor is seen as
    (outer, L, inner) and normalised along L."""
    device = device_for_plan()
    cupy = device.cupy
    shape = shape_of(types[0])
    axes = softmax_axes(node.attrs, len(shape))
    outer = int(np.prod(shape[: axes[0]]))
    length = int(np.prod([shape[a] for a in axes]))
    inner = int(np.prod(shape[axes[-1] + 1 :]))

    def launch(x: CudaArray) -> CudaArray:
        if x.size == 0:
            return CudaArray.empty(device, shape)
        lines = x.array.reshape(outer, length, inner)
        e = cupy.exp(lines - lines.max(axis=1, keepdims=True))
        e /= e.sum(axis=1, keepdims=True)
        return CudaArray(device, cupy.ascontiguousarray(e, dtype=cupy.float32).reshape(shape))

    return CudaStep(device, launch, (0,))
