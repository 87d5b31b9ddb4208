"""Add, Sub, Mul, Div with numpy broadcasting on CUDA (CuPy's elementwise kernels)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cuda.array import CudaArray
from edgecnn.kernels.cuda.step import (
    CudaStep,
    constant_on_device,
    cuda_kernel,
    device_for_plan,
    either,
    is_float32,
    shape_of,
    variable_inputs,
)
from edgecnn.ops.common import broadcast_shapes

Types = Sequence["TensorType | None"]
Values = Sequence["np.ndarray | None"]

UFUNCS = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide"}


def binary_supported(node: Node, types: Types, values: Values) -> bool:
    return len(types) == 2 and is_float32(types[0]) and is_float32(types[1])


def _binary(node: Node, types: Types, values: Values) -> CudaStep:
    device = device_for_plan()
    cupy = device.cupy
    ufunc = getattr(cupy, UFUNCS[node.op])
    out_shape = tuple(broadcast_shapes(shape_of(types[0]), shape_of(types[1])))  # type: ignore[arg-type]
    consts = constant_on_device(device, values, 0), constant_on_device(device, values, 1)

    def launch(a: CudaArray, b: CudaArray) -> CudaArray:
        a, b = either(consts[0], a), either(consts[1], b)
        y = device.empty(out_shape)
        ufunc(a.array, b.array, out=y)
        return CudaArray(device, y)

    return CudaStep(device, launch, variable_inputs(node, values, (0, 1)))


def _register() -> None:
    for op in UFUNCS:

        def factory(node: Node, types: Types, values: Values) -> CudaStep:
            return _binary(node, types, values)

        cuda_kernel(op, when=binary_supported, name=f"cuda_{op.lower()}")(factory)


_register()
