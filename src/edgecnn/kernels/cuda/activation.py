"""Elementwise activations on CUDA: Relu, LeakyRelu, Sigmoid, Tanh, Clip, HardSwish (one kernel,
the activation's code an argument: a uniform branch costs a GPU nothing)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cuda.array import CudaArray
from edgecnn.kernels.cuda.step import CudaStep, cuda_kernel, device_for_plan, is_float32, shape_of
from edgecnn.kernels.opencl.step import ACTIVATION_CODES

Types = Sequence["TensorType | None"]
Values = Sequence["np.ndarray | None"]
Bounds = Callable[..., tuple[float, float, float]]  # (slope, low, high) from the node and the run's inputs


def activation_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0]) and all(t is None or t.dtype == "float32" for t in types[1:])


def _bound(value: object, default: float) -> float:
    return default if value is None else float(np.asarray(value).reshape(-1)[0])


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


def _fixed(slope: float = 0.0) -> Bounds:
    return lambda *rest: (slope, -math.inf, math.inf)


@cuda_kernel("Relu", when=activation_supported, name="cuda_relu")
def cuda_relu(node: Node, types: Types, values: Values) -> CudaStep:
    return activation_step("relu", types, _fixed())


@cuda_kernel("LeakyRelu", when=activation_supported, name="cuda_leaky_relu")
def cuda_leaky_relu(node: Node, types: Types, values: Values) -> CudaStep:
    return activation_step("leaky_relu", types, _fixed(node.attrs.alpha))


@cuda_kernel("Sigmoid", when=activation_supported, name="cuda_sigmoid")
def cuda_sigmoid(node: Node, types: Types, values: Values) -> CudaStep:
    return activation_step("sigmoid", types, _fixed())


@cuda_kernel("Tanh", when=activation_supported, name="cuda_tanh")
def cuda_tanh(node: Node, types: Types, values: Values) -> CudaStep:
    return activation_step("tanh", types, _fixed())


@cuda_kernel("HardSwish", when=activation_supported, name="cuda_hard_swish")
def cuda_hard_swish(node: Node, types: Types, values: Values) -> CudaStep:
    return activation_step("hard_swish", types, _fixed())


@cuda_kernel("Clip", when=activation_supported, name="cuda_clip")
def cuda_clip(node: Node, types: Types, values: Values) -> CudaStep:
    """Bounds known at plan time are read once; others come from the host at each run."""
    fixed = [None if i >= len(values) or values[i] is None else values[i] for i in (1, 2)]

    def bounds(low: object = None, high: object = None) -> tuple[float, float, float]:
        low = fixed[0] if fixed[0] is not None else low
        high = fixed[1] if fixed[1] is not None else high
        return 0.0, _bound(low, -math.inf), _bound(high, math.inf)

    return activation_step("clip", types, bounds)
