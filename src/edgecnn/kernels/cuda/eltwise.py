"""Add, Sub, Mul, Div with numpy broadcasting on CUDA (CuPy's elementwise kernels)."""

from __future__ import annotations

from edgecnn.ir.graph import Node, concrete_dims
from edgecnn.kernels.cuda.array import CudaArray
from edgecnn.kernels.cuda.step import CudaStep, constant_on_device, cuda_kernel, device_for_plan
from edgecnn.kernels.gpu.eltwise import BINARY_OPS, binary_supported
from edgecnn.kernels.gpu.step import Types, Values, either, shape_of, variable_inputs
from edgecnn.ops.common import broadcast_shapes

UFUNCS = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide"}
"""CuPy's ufunc of each of kernels.gpu.eltwise.BINARY_OPS."""


def _binary(node: Node, types: Types, values: Values) -> CudaStep:
    device = device_for_plan()
    cupy = device.cupy
    ufunc = getattr(cupy, UFUNCS[node.op])
    out_shape = concrete_dims(broadcast_shapes(shape_of(types[0]), shape_of(types[1])))
    consts = constant_on_device(device, values, 0), constant_on_device(device, values, 1)

    def launch(a: CudaArray, b: CudaArray) -> CudaArray:
        a, b = either(consts[0], a), either(consts[1], b)
        y = device.empty(out_shape)
        ufunc(a.array, b.array, out=y)
        return CudaArray(device, y)

    return CudaStep(device, launch, variable_inputs(node, values, (0, 1)))


for _op in BINARY_OPS:
    cuda_kernel(_op, when=binary_supported, name=f"cuda_{_op.lower()}")(_binary)
