"""Shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity), Concat, Split and Transpose on
OpenCL, so that a chain of OpenCL steps keeps its data on the device across them. A reshape of a device tensor is a
new view of the same buffer; on host arrays these steps do what the reference kernels do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.opencl.array import DeviceArray
from edgecnn.kernels.opencl.runtime import OpenCLDevice
from edgecnn.kernels.opencl.step import OpenCLStep, device_for_plan, is_float32, opencl_kernel, shape_of
from edgecnn.ops.common import normalize_axis
from edgecnn.ops.registry import get_op
from edgecnn.ops.shape import transpose_perm

Types = Sequence["TensorType | None"]
Values = Sequence["np.ndarray | None"]


class ViewStep:
    """Reshape the first input to a shape fixed at plan time, wherever the data lives."""

    __slots__ = ("device", "shape")

    def __init__(self, device: OpenCLDevice, shape: tuple[int, ...]) -> None:
        self.device = device
        self.shape = shape

    def run_device(self, x: Any, *rest: Any) -> Any:
        if isinstance(x, DeviceArray):
            return x.reshape(self.shape)
        return self(x)

    def __call__(self, x: Any, *rest: Any) -> np.ndarray:
        return np.array(x, copy=True).reshape(self.shape)


def view_supported(node: Node, types: Types, values: Values) -> bool:
    """The output shape is known at plan time (the shape/axes inputs are constants)."""
    if not is_float32(types[0]):
        return False
    if any(values[i] is None for i in range(1, len(node.inputs)) if node.inputs[i]):
        return False
    (out,) = get_op(node.op).infer(node.attrs, types, values)[:1]
    return out.is_concrete


def _view(node: Node, types: Types, values: Values) -> ViewStep:
    (out,) = get_op(node.op).infer(node.attrs, types, values)[:1]
    return ViewStep(device_for_plan(), shape_of(out))


def _register_views() -> None:
    for op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"):
        opencl_kernel(op, when=view_supported, name=f"opencl_{op.lower()}_view")(_view)


_register_views()


def concat_supported(node: Node, types: Types, values: Values) -> bool:
    return len(types) >= 1 and all(is_float32(t) for t in types)


@opencl_kernel("Concat", when=concat_supported, name="opencl_concat")
def opencl_concat(node: Node, types: Types, values: Values) -> OpenCLStep:
    """Each input is copied as rows of prod(shape[axis:]) elements into the output's wider rows."""
    device = device_for_plan()
    shapes = [shape_of(t) for t in types]
    axis = normalize_axis(node.attrs.axis, len(shapes[0]))
    (out,) = get_op("Concat").infer(node.attrs, types, values)
    out_shape = shape_of(out)
    out_row = int(np.prod(out_shape[axis:]))
    pieces, start = [], 0
    for shape in shapes:
        row = int(np.prod(shape[axis:]))
        pieces.append((np.int32(row), np.int32(start), int(np.prod(shape))))
        start += row

    def launch(*xs: DeviceArray) -> DeviceArray:
        y = DeviceArray.empty(device, out_shape)
        for x, (row, begin, total) in zip(xs, pieces):
            device.launch_1d("copy_rows", total, x.buffer, y.buffer, row, np.int32(out_row), begin)
        return y

    return OpenCLStep(device, launch, range(len(shapes)))


def split_supported(node: Node, types: Types, values: Values) -> bool:
    if not is_float32(types[0]) or (len(types) > 1 and types[1] is not None and values[1] is None):
        return False
    return all(t.is_concrete for t in get_op("Split").infer(node.attrs, types, values))


@opencl_kernel("Split", when=split_supported, name="opencl_split")
def opencl_split(node: Node, types: Types, values: Values) -> OpenCLStep:
    """Each output takes its rows of prod(shape[axis:]) elements out of the input's wider rows."""
    device = device_for_plan()
    in_shape = shape_of(types[0])
    axis = normalize_axis(node.attrs.axis, len(in_shape))
    in_row = np.int32(np.prod(in_shape[axis:]))
    outputs, start = [], 0
    for out in get_op("Split").infer(node.attrs, types, values):
        shape = shape_of(out)
        row = int(np.prod(shape[axis:]))
        outputs.append((shape, np.int32(row), np.int32(start), int(np.prod(shape))))
        start += row

    def launch(x: DeviceArray, sizes: object = None) -> tuple[DeviceArray, ...]:
        ys = []
        for shape, row, begin, total in outputs:
            y = DeviceArray.empty(device, shape)
            device.launch_1d("copy_rows_from", total, x.buffer, y.buffer, in_row, row, begin)
            ys.append(y)
        return tuple(ys)

    return OpenCLStep(device, launch, (0,))


def transpose_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0])


@opencl_kernel("Transpose", when=transpose_supported, name="opencl_transpose")
def opencl_transpose(node: Node, types: Types, values: Values) -> OpenCLStep:
    device = device_for_plan()
    shape = shape_of(types[0])
    perm = transpose_perm(node.attrs, len(shape))
    strides = [int(np.prod(shape[axis + 1 :])) for axis in range(len(shape))]
    out_shape = tuple(shape[p] for p in perm)
    meta = np.array([*out_shape, *(strides[p] for p in perm)] or [1, 0], np.int32)
    meta_device = DeviceArray.upload(device, meta.view(np.float32))  # int32 bits in a float32 buffer
    rank, total = np.int32(max(len(shape), 1)), int(np.prod(out_shape))

    def launch(x: DeviceArray) -> DeviceArray:
        y = DeviceArray.empty(device, out_shape)
        device.launch_1d("permute", total, x.buffer, y.buffer, meta_device.buffer, rank)
        return y

    return OpenCLStep(device, launch, (0,))
