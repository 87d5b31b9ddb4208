"""Shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity), Concat, Split and Transpose on
CUDA, so that a chain of CUDA steps keeps its data on the GPU across them. A reshape of a device
tensor is a view of the same memory; the copies are one kernel launch per input or output (CuPy's
concatenate and transpose cost several host calls each); on host arrays the views do what the
reference kernels do."""

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
    """Each input is copied as rows of prod(shape[axis:]) elements into the output's wider rows."""
    device = device_for_plan()
    shapes = [shape_of(t) for t in types]
    axis = normalize_axis(node.attrs.axis, len(shapes[0]))
    (out,) = get_op("Concat").infer(node.attrs, types, values)
    out_shape = shape_of(out)
    out_row = np.int32(np.prod(out_shape[axis:]))
    pieces, start = [], 0
    for shape in shapes:
        row = int(np.prod(shape[axis:]))
        pieces.append((int(np.prod(shape)), np.int32(row), np.int32(start)))
        start += row

    def launch(*xs: CudaArray) -> CudaArray:
        y = CudaArray.empty(device, out_shape)
        for x, (total, row, begin) in zip(xs, pieces):
            device.launch("copy_rows", total, x.array, y.array, row, out_row, begin)
        return y

    return CudaStep(device, launch, range(len(shapes)))


@cuda_kernel("Split", when=split_supported, name="cuda_split")
def cuda_split(node: Node, types: Types, values: Values) -> CudaStep:
    """Each output takes its rows of prod(shape[axis:]) elements out of the input's wider rows."""
    device = device_for_plan()
    in_shape = shape_of(types[0])
    axis = normalize_axis(node.attrs.axis, len(in_shape))
    in_row = np.int32(np.prod(in_shape[axis:]))
    outputs, start = [], 0
    for out in get_op("Split").infer(node.attrs, types, values):
        shape = shape_of(out)
        row = int(np.prod(shape[axis:]))
        outputs.append((shape, np.int32(row), np.int32(start)))
        start += row

    def launch(x: CudaArray, sizes: object = None) -> tuple[CudaArray, ...]:
        pieces = []
        for shape, row, begin in outputs:
            y = CudaArray.empty(device, shape)
            device.launch("copy_rows_from", y.size, x.array, y.array, in_row, row, begin)
            pieces.append(y)
        return tuple(pieces)

    return CudaStep(device, launch, (0,))


@cuda_kernel("Transpose", when=transpose_supported, name="cuda_transpose")
def cuda_transpose(node: Node, types: Types, values: Values) -> CudaStep:
    device = device_for_plan()
    shape = shape_of(types[0])
    perm = transpose_perm(node.attrs, len(shape))
    strides = [int(np.prod(shape[axis + 1 :])) for axis in range(len(shape))]
    out_shape = tuple(shape[p] for p in perm)
    meta = np.array([*out_shape, *(strides[p] for p in perm)] or [1, 0], np.int32)
    with device.cuda:
        meta_device = device.cupy.asarray(meta)  # uploaded once per plan
    rank = np.int32(max(len(shape), 1))

    def launch(x: CudaArray) -> CudaArray:
        y = CudaArray.empty(device, out_shape)
        device.launch("permute", y.size, x.array, y.array, meta_device, rank)
        return y

    return CudaStep(device, launch, (0,))
