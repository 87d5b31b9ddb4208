"""Elementwise activations on CUDA (kernels.gpu.activations.ACTIVATION_OPS: Relu, LeakyRelu,
Sigmoid, Tanh, HardSwish, Clip): one kernel, the activation's code an argument (a uniform branch
costs a GPU nothing)."""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.cuda.array import CudaArray
from edgecnn.kernels.cuda.step import CudaStep, cuda_kernel, device_for_plan
from edgecnn.kernels.gpu.activations import (
    ACTIVATION_CODES,
    ACTIVATION_OPS,
    Bounds,
    activation_bounds,
    activation_supported,
)
from edgecnn.kernels.gpu.step import Types, Values, shape_of


def activation_step(kind: str, types: Types, params: Bounds) -> CudaStep:
    """One launch of the activation kernel; ``params(*inputs)`` gives (slope, low, high) at run time."""
    device = device_for_plan()
    shape = shape_of(types[0])
    code = np.int32(ACTIVATION_CODES[kind])

    def launch(x: CudaArray, *rest: object) -> CudaArray:
        y = CudaArray.empty(device, shape)
        slope, low, high = params(*rest)
        device.launch("activation", y.size, x.array, y.array, code, np.float32(slope), np.float32(low),
                      np.float32(high))  # fmt: skip
        return y

    return CudaStep(device, launch, (0,))


def cuda_activation(node: Node, types: Types, values: Values) -> CudaStep:
    return activation_step(ACTIVATION_OPS[node.op], types, activation_bounds(node, values))


for _op, _name in ACTIVATION_OPS.items():
    cuda_kernel(_op, when=activation_supported, name=f"cuda_{_name}")(cuda_activation)
