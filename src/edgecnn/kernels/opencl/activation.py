"""Elementwise activations on OpenCL (kernels.gpu.activations.ACTIVATION_OPS: Relu, LeakyRelu,
Sigmoid, Tanh, HardSwish, Clip), one act_<name> kernel each."""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.gpu.activations import (
    ACTIVATION_CODES,
    ACTIVATION_OPS,
    Bounds,
    activation_bounds,
    activation_supported,
)
from edgecnn.kernels.gpu.step import Types, Values, shape_of
from edgecnn.kernels.opencl.array import DeviceArray
from edgecnn.kernels.opencl.runtime import ACTIVATION_KERNELS
from edgecnn.kernels.opencl.step import OpenCLStep, device_for_plan, opencl_kernel


def activation_step(kernel: str, types: Types, params: Bounds) -> OpenCLStep:
    """One launch of ``kernel``; ``params(*inputs)`` gives (slope, low, high) at run time."""
    device = device_for_plan()
    shape = shape_of(types[0])
    total = int(np.prod(shape))

    def launch(x: DeviceArray, *rest: object) -> DeviceArray:
        y = DeviceArray.empty(device, shape)
        slope, low, high = params(*rest)
        device.launch_1d(
            kernel, total, x.buffer, y.buffer, np.float32(slope), np.float32(low), np.float32(high)
        )
        return y

    return OpenCLStep(device, launch, (0,))


def opencl_activation(node: Node, types: Types, values: Values) -> OpenCLStep:
    kernel = ACTIVATION_KERNELS[ACTIVATION_CODES[ACTIVATION_OPS[node.op]]]
    return activation_step(kernel, types, activation_bounds(node, values))


for _op, _name in ACTIVATION_OPS.items():
    opencl_kernel(_op, when=activation_supported, name=f"opencl_{_name}")(opencl_activation)
