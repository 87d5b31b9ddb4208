"""Add, Sub, Mul, Div with numpy broadcasting on OpenCL."""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Node, concrete_dims
from edgecnn.kernels.gpu.eltwise import BINARY_OPS, binary_supported
from edgecnn.kernels.gpu.step import Types, Values, either, shape_of, variable_inputs
from edgecnn.kernels.opencl.array import DeviceArray
from edgecnn.kernels.opencl.step import OpenCLStep, constant_on_device, device_for_plan, opencl_kernel
from edgecnn.ops.common import broadcast_shapes

BINARY_CODES = {op: code for code, op in enumerate(BINARY_OPS)}
"""The ``binary`` kernel's code of each op (eltwise.cl)."""


def broadcast_plan(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[list[int], list[int], list[int]]:
    """(dims, a strides, b strides) of the output, in elements, zero where an input broadcasts;
    neighbouring axes along which both inputs step alike are merged (same shapes: one axis)."""
    out = concrete_dims(broadcast_shapes(a, b))
    rank = len(out)

    def strides(shape: tuple[int, ...]) -> list[int]:
        padded = (1,) * (rank - len(shape)) + shape
        result, step = [0] * rank, 1
        for axis in reversed(range(rank)):
            result[axis] = step if padded[axis] > 1 else 0
            step *= padded[axis]
        return result

    sa, sb = strides(a), strides(b)
    dims: list[int] = []
    a_strides: list[int] = []
    b_strides: list[int] = []
    for d, x, y in zip(out, sa, sb):
        if d == 1:
            continue
        if dims and a_strides[-1] == x * d and b_strides[-1] == y * d:
            dims[-1] *= d  # the previous axis continues this one in both inputs
            a_strides[-1], b_strides[-1] = x, y
            continue
        dims.append(d)
        a_strides.append(x)
        b_strides.append(y)
    return dims or [1], a_strides or [0], b_strides or [0]


def _binary(node: Node, types: Types, values: Values) -> OpenCLStep:
    device = device_for_plan()
    a_shape, b_shape = shape_of(types[0]), shape_of(types[1])
    out_shape = concrete_dims(broadcast_shapes(a_shape, b_shape))
    dims, a_strides, b_strides = broadcast_plan(a_shape, b_shape)
    meta = DeviceArray.upload(device, np.array(dims + a_strides + b_strides, np.int32).view(np.float32))
    consts = constant_on_device(device, values, 0), constant_on_device(device, values, 1)
    total = int(np.prod(out_shape))
    op, rank = np.int32(BINARY_CODES[node.op]), np.int32(len(dims))

    def launch(a: DeviceArray, b: DeviceArray) -> DeviceArray:
        a, b = either(consts[0], a), either(consts[1], b)
        y = DeviceArray.empty(device, out_shape)
        device.launch_1d("binary", total, a.buffer, b.buffer, y.buffer, op, meta.buffer, rank)
        return y

    return OpenCLStep(device, launch, variable_inputs(node, values, (0, 1)))


for _op in BINARY_OPS:
    opencl_kernel(_op, when=binary_supported, name=f"opencl_{_op.lower()}")(_binary)
