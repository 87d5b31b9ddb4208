"""Elementwise activations on OpenCL: Relu, LeakyRelu, Sigmoid, Tanh, Clip, HardSwish."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.opencl.array import DeviceArray
from edgecnn.kernels.opencl.step import OpenCLStep, device_for_plan, is_float32, opencl_kernel, shape_of

Types = Sequence["TensorType | None"]
Values = Sequence["np.ndarray | None"]
Bounds = Callable[..., tuple[float, float, float]]  # (slope, low, high) from the node and the run's inputs


def activation_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0]) and all(t is None or t.dtype == "float32" for t in types[1:])


def _bound(value: object, default: float) -> float:
    return default if value is None else float(np.asarray(value).reshape(-1)[0])


def activation_step(kernel: str, types: Types, params: Bounds) -> OpenCLStep:
    """One launch of act_<kernel>; ``params(*inputs)`` gives (slope, low, high) at run time."""
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


def _fixed(slope: float = 0.0) -> Bounds:
    return lambda *rest: (slope, -math.inf, math.inf)


@opencl_kernel("Relu", when=activation_supported, name="opencl_relu")
def opencl_relu(node: Node, types: Types, values: Values) -> OpenCLStep:
    return activation_step("act_relu", types, _fixed())


@opencl_kernel("LeakyRelu", when=activation_supported, name="opencl_leaky_relu")
def opencl_leaky_relu(node: Node, types: Types, values: Values) -> OpenCLStep:
    return activation_step("act_leaky_relu", types, _fixed(node.attrs.alpha))


@opencl_kernel("Sigmoid", when=activation_supported, name="opencl_sigmoid")
def opencl_sigmoid(node: Node, types: Types, values: Values) -> OpenCLStep:
    return activation_step("act_sigmoid", types, _fixed())


@opencl_kernel("Tanh", when=activation_supported, name="opencl_tanh")
def opencl_tanh(node: Node, types: Types, values: Values) -> OpenCLStep:
    return activation_step("act_tanh", types, _fixed())


@opencl_kernel("HardSwish", when=activation_supported, name="opencl_hard_swish")
def opencl_hard_swish(node: Node, types: Types, values: Values) -> OpenCLStep:
    return activation_step("act_hard_swish", types, _fixed())


@opencl_kernel("Clip", when=activation_supported, name="opencl_clip")
def opencl_clip(node: Node, types: Types, values: Values) -> OpenCLStep:
    """Bounds known at plan time are read once; others come from the host at each run."""
    fixed = [None if i >= len(values) or values[i] is None else values[i] for i in (1, 2)]

    def bounds(low: object = None, high: object = None) -> tuple[float, float, float]:
        low = fixed[0] if fixed[0] is not None else low
        high = fixed[1] if fixed[1] is not None else high
        return 0.0, _bound(low, -math.inf), _bound(high, math.inf)

    return activation_step("act_clip", types, bounds)
