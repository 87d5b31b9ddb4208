"""What CUDA kernel factories share: the prepared step object, registration, constants uploaded once,
and the activation parameters of fused ops (the same codes as the OpenCL backend's)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cuda.array import CudaArray, to_device, to_host
from edgecnn.kernels.cuda.runtime import MAX_ELEMENTS, CudaDevice, get_device
from edgecnn.kernels.opencl.step import NO_ACTIVATION, activation_params
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
    """Of ``indices``, the inputs that are present and not constants (copied to the GPU per run)."""
    return [i for i in indices if i < len(node.inputs) and node.inputs[i] and values[i] is None]


def constant_on_device(
    device: CudaDevice, values: Sequence[np.ndarray | None], index: int
) -> CudaArray | None:
    """Input ``index`` uploaded once if it is a plan-time constant; None otherwise."""
    value = values[index] if index < len(values) else None
    return None if value is None else CudaArray.upload(device, value)


def either(constant: CudaArray | None, value: Any) -> Any:
    """The plan-time upload of an input if there is one, else the value passed at run time."""
    return value if constant is None else constant


def device_for_plan() -> CudaDevice:
    """The CUDA device the plan being built targets."""
    return get_device()
