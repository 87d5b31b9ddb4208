"""What CUDA kernel factories share: the prepared step object, registration, constants uploaded once;
the plan-time checks and the activation parameters of fused ops are the OpenCL backend's (pure
Python: the same float32 / 32-bit-index limits and activation codes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from edgecnn.kernels.cuda.array import CudaArray, to_device, to_host
from edgecnn.kernels.cuda.runtime import CudaDevice, get_device
from edgecnn.kernels.opencl.step import (  # backend-neutral plan-time helpers, shared
    NO_ACTIVATION,
    activation_params,
    either,
    is_float32,
    shape_of,
    variable_inputs,
)
from edgecnn.kernels.registry import KernelFactory, KernelPredicate, register_kernel

BACKEND = "cuda"

__all__ = [
    "NO_ACTIVATION",
    "CudaStep",
    "activation_params",
    "constant_on_device",
    "cuda_kernel",
    "device_for_plan",
    "either",
    "is_float32",
    "shape_of",
    "variable_inputs",
]

Launch = Callable[..., "CudaArray | tuple[CudaArray, ...]"]


class CudaStep:
    """A prepared CUDA step.

    ``step(*arrays)`` copies the variable inputs to the GPU, runs, and copies the result back: it works
    with any executor. ``step.run_device(*values)`` takes numpy arrays, CuPy arrays or CudaArrays and
    returns CudaArrays, so an executor keeps activations on the GPU between CUDA steps. Inputs that
    were constant at plan time were uploaded then; the values passed for them are ignored.
    """

    __slots__ = ("device", "device_inputs", "launch")

    def __init__(self, device: CudaDevice, launch: Launch, device_inputs: Sequence[int]) -> None:
        self.device = device
        self.launch = launch
        self.device_inputs = frozenset(device_inputs)

    def run_device(self, *args: Any) -> CudaArray | tuple[CudaArray, ...]:
        moved = [
            to_device(self.device, a) if i in self.device_inputs and a is not None else to_host(a)
            for i, a in enumerate(args)
        ]
        with self.device.cuda:
            return self.launch(*moved)

    def __call__(self, *args: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        result = self.run_device(*args)
        if isinstance(result, tuple):
            return tuple(r.get() for r in result)
        return result.get()


def cuda_kernel(
    op: str, *, when: KernelPredicate | None = None, priority: int = 0, name: str | None = None
) -> Callable[[KernelFactory], KernelFactory]:
    """``register_kernel`` for the "cuda" backend."""
    return register_kernel(op, backend=BACKEND, when=when, priority=priority, name=name)


def constant_on_device(
    device: CudaDevice, values: Sequence[np.ndarray | None], index: int
) -> CudaArray | None:
    """Input ``index`` uploaded once if it is a plan-time constant; None otherwise."""
    value = values[index] if index < len(values) else None
    return None if value is None else CudaArray.upload(device, value)


def device_for_plan() -> CudaDevice:
    """The CUDA device the plan being built targets."""
    return get_device()
