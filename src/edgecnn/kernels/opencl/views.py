"""Shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity), Concat, Split and Transpose on
OpenCL, so that a chain of OpenCL steps keeps its data on the device across them (plans and the view
step in kernels.gpu.views)."""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.gpu.step import Types, Values
from edgecnn.kernels.gpu.views import (
    VIEW_OPS,
    ViewStep,
    concat_plan,
    concat_supported,
    split_plan,
    split_supported,
    transpose_plan,
    transpose_supported,
    view_shape,
    view_supported,
)
from edgecnn.kernels.opencl.array import DeviceArray
from edgecnn.kernels.opencl.step import OpenCLStep, device_for_plan, opencl_kernel


def opencl_view(node: Node, types: Types, values: Values) -> ViewStep:
    return ViewStep(device_for_plan(), DeviceArray, view_shape(node, types, values))


for _op in VIEW_OPS:
    opencl_kernel(_op, when=view_supported, name=f"opencl_{_op.lower()}_view")(opencl_view)


@opencl_kernel("Concat", when=concat_supported, name="opencl_concat")
def opencl_concat(node: Node, types: Types, values: Values) -> OpenCLStep:
    """Each input is copied as rows into the output's wider rows."""
    device = device_for_plan()
    out_shape, out_row, pieces = concat_plan(node, types, values)

    def launch(*xs: DeviceArray) -> DeviceArray:
        y = DeviceArray.empty(device, out_shape)
        for x, piece in zip(xs, pieces):
            device.launch_1d("copy_rows", piece.total, x.buffer, y.buffer, piece.row, out_row, piece.start)
        return y

    return OpenCLStep(device, launch, range(len(pieces)))


@opencl_kernel("Split", when=split_supported, name="opencl_split")
def opencl_split(node: Node, types: Types, values: Values) -> OpenCLStep:
    """Each output takes its rows out of the input's wider rows."""
    device = device_for_plan()
    in_row, outputs = split_plan(node, types, values)

    def launch(x: DeviceArray, sizes: object = None) -> tuple[DeviceArray, ...]:
        ys = []
        for out in outputs:
            y = DeviceArray.empty(device, out.shape)
            device.launch_1d("copy_rows_from", out.total, x.buffer, y.buffer, in_row, out.row, out.start)
            ys.append(y)
        return tuple(ys)

    return OpenCLStep(device, launch, (0,))


@opencl_kernel("Transpose", when=transpose_supported, name="opencl_transpose")
def opencl_transpose(node: Node, types: Types, values: Values) -> OpenCLStep:
    device = device_for_plan()
    out_shape, meta, rank = transpose_plan(node, types)
    meta_device = DeviceArray.upload(device, meta.view(np.float32))  # int32 bits in a float32 buffer
    total = int(np.prod(out_shape))

    def launch(x: DeviceArray) -> DeviceArray:
        y = DeviceArray.empty(device, out_shape)
        device.launch_1d("permute", total, x.buffer, y.buffer, meta_device.buffer, rank)
        return y

    return OpenCLStep(device, launch, (0,))
