"""What OpenCL kernel factories share: the prepared step object, plan-time checks, constants
uploaded once, and the activation parameters of fused ops."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.opencl.array import DeviceArray, to_device, to_host
from edgecnn.kernels.opencl.runtime import MAX_ELEMENTS, OpenCLDevice, get_device
from edgecnn.kernels.registry import KernelFactory, KernelPredicate, register_kernel

BACKEND = "opencl"

ACTIVATION_CODES = {
    "none": 0,
    "relu": 1,
    "leaky_relu": 2,
    "clip": 3,
    "sigmoid": 4,
    "hard_swish": 5,
    "silu": 6,
    "tanh": 7,
}
"""Codes of common.cl's ``activate`` (edgecnn.ops.fused.ACTIVATIONS order, then tanh)."""

Launch = Callable[..., "DeviceArray | tuple[DeviceArray, ...]"]


class OpenCLStep:
    """A prepared OpenCL step.

    ``step(*arrays)`` copies the variable inputs to the device, runs, and copies the result back: it
    works with any executor. ``step.run_device(*values)`` takes numpy arrays or DeviceArrays and returns
    DeviceArrays, so an executor can keep activations on the device between OpenCL steps. Inputs that
    were constant at plan time were uploaded then; the values passed for them are ignored.
    """

    __slots__ = ("device", "device_inputs", "launch")

    def __init__(self, device: OpenCLDevice, launch: Launch, device_inputs: Sequence[int]) -> None:
        self.device = device
        self.launch = launch
        self.device_inputs = frozenset(device_inputs)

    def run_device(self, *args: Any) -> DeviceArray | tuple[DeviceArray, ...]:
        moved = [
            to_device(self.device, a) if i in self.device_inputs and a is not None else to_host(a)
            for i, a in enumerate(args)
        ]
        return self.launch(*moved)

    def __call__(self, *args: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        result = self.run_device(*args)
        if isinstance(result, tuple):
            return tuple(r.get() for r in result)
        return result.get()


def opencl_kernel(
    op: str, *, when: KernelPredicate | None = None, priority: int = 0, name: str | None = None
) -> Callable[[KernelFactory], KernelFactory]:
    """``register_kernel`` for the "opencl" backend."""
    return register_kernel(op, backend=BACKEND, when=when, priority=priority, name=name)


def is_float32(t: TensorType | None, rank: int | tuple[int, ...] | None = None) -> bool:
    """A float32 tensor of known shape (and of the given rank(s)) that 32-bit indices can address."""
    if t is None or t.dtype != "float32" or t.shape is None or not t.is_concrete:
        return False
    if rank is not None and len(t.shape) not in ((rank,) if isinstance(rank, int) else rank):
        return False
    return int(np.prod(t.shape, dtype=np.int64)) <= MAX_ELEMENTS


def shape_of(t: TensorType | None) -> tuple[int, ...]:
    assert t is not None and t.shape is not None
    return tuple(int(d) for d in t.shape)  # type: ignore[arg-type]


def variable_inputs(node: Node, values: Sequence[np.ndarray | None], indices: Sequence[int]) -> list[int]:
    """Of ``indices``, the inputs that are present and not constants (copied to the device per run)."""
    return [i for i in indices if i < len(node.inputs) and node.inputs[i] and values[i] is None]


def constant_on_device(
    device: OpenCLDevice, values: Sequence[np.ndarray | None], index: int
) -> DeviceArray | None:
    """Input ``index`` uploaded once if it is a plan-time constant; None otherwise."""
    value = values[index] if index < len(values) else None
    return None if value is None else DeviceArray.upload(device, value)


def either(constant: DeviceArray | None, value: Any) -> Any:
    """The plan-time upload of an input if there is one, else the value passed at run time."""
    return value if constant is None else constant


def activation_params(attrs: Any) -> tuple[np.int32, np.float32, np.float32, np.float32]:
    """(code, negative slope, low, high) of a fused op's activation (edgecnn.ops.fused.FusedActivation)."""
    return (
        np.int32(ACTIVATION_CODES[attrs.activation]),
        np.float32(attrs.negative_slope),
        np.float32(attrs.low),
        np.float32(attrs.high),
    )


NO_ACTIVATION = (np.int32(0), np.float32(0.0), np.float32(-math.inf), np.float32(math.inf))


def device_for_plan() -> OpenCLDevice:
    """The OpenCL device the plan being built targets."""
    return get_device()
