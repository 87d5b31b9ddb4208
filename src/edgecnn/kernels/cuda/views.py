"""Shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity), Concat, Split and Transpose on
CUDA, so that a chain of CUDA steps keeps its data on the GPU across them. A reshape of a device
tensor is a view of the same memory; on host arrays these steps do what the reference kernels do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cuda.array import CudaArray
from edgecnn.kernels.cuda.runtime import CudaDevice
from edgecnn.kernels.cuda.step import CudaStep, cuda_kernel, device_for_plan, shape_of
from edgecnn.kernels.opencl.views import (
    concat_supported,
    split_supported,
    transpose_supported,
    view_supported,
)
from edgecnn.ops.common import normalize_axis
from edgecnn.ops.registry import get_op
from edgecnn.ops.shape import transpose_perm

Types = Sequence["TensorType | None"]
Values = Sequence["np.ndarray | None"]

__all__ = ["ViewStep"]


class ViewStep:
    """Reshape the first input to a shape fixed at plan time, wherever the data lives."""

    __slots__ = ("device", "shape")

    def __init__(self, device: CudaDevice, shape: tuple[int, ...]) -> None:
        self.device = device
        self.shape = shape

    def run_device(self, x: Any, *rest: Any) -> Any:
        if isinstance(x, CudaArray):
            return x.reshape(self.shape)
        return self(x)

    def __call__(self, x: Any, *rest: Any) -> np.ndarray:
        return np.array(x, copy=True).reshape(self.shape)


def _view(node: Node, types: Types, values: Values) -> ViewStep:
    (out,) = get_op(node.op).infer(node.attrs, types, values)[:1]
    return ViewStep(device_for_plan(), shape_of(out))


def _register_views() -> None:
    for op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"):
        cuda_kernel(op, when=view_supported, name=f"cuda_{op.lower()}_view")(_view)


_register_views()


@cuda_kernel("Concat", when=concat_supported, name="cuda_concat")
def cuda_concat(node: Node, types: Types, values: Values) -> CudaStep:
    device = device_for_plan()
    cupy = device.cupy
    axis = normalize_axis(node.attrs.axis, len(shape_of(types[0])))

    def launch(*xs: CudaArray) -> CudaArray:
        return CudaArray(device, cupy.concatenate([x.array for x in xs], axis=axis))

    return CudaStep(device, launch, range(len(types)))


@cuda_kernel("Split", when=split_supported, name="cuda_split")
def cuda_split(node: Node, types: Types, values: Values) -> CudaStep:
    device = device_for_plan()
    cupy = device.cupy
    in_shape = shape_of(types[0])
    axis = normalize_axis(node.attrs.axis, len(in_shape))
    bounds, start = [], 0
    for out in get_op("Split").infer(node.attrs, types, values):
        size = shape_of(out)[axis]
        bounds.append((start, start + size))
        start += size

    def launch(x: CudaArray, sizes: object = None) -> tuple[CudaArray, ...]:
        index: list[Any] = [slice(None)] * len(in_shape)
        pieces = []
        for begin, end in bounds:
            index[axis] = slice(begin, end)
            pieces.append(CudaArray(device, cupy.ascontiguousarray(x.array[tuple(index)])))
        return tuple(pieces)

    return CudaStep(device, launch, (0,))


@cuda_kernel("Transpose", when=transpose_supported, name="cuda_transpose")
def cuda_transpose(node: Node, types: Types, values: Values) -> CudaStep:
    device = device_for_plan()
    cupy = device.cupy
    shape = shape_of(types[0])
    perm = tuple(transpose_perm(node.attrs, len(shape)))
    out_shape = tuple(shape[p] for p in perm)

    def launch(x: CudaArray) -> CudaArray:
        moved = cupy.ascontiguousarray(cupy.transpose(x.array, perm))
        return CudaArray(device, moved.reshape(out_shape))  # a 0-d input stays 0-d

    return CudaStep(device, launch, (0,))
