"""The step type of the GPU backends and their plan-time checks.

A prepared step works with host arrays (``step(*arrays)`` copies in and out, for any executor) and
offers ``run_device``, which takes host or device tensors and returns device tensors, so that the
executor (edgecnn.runtime.executor) keeps activations on the device between steps of one backend.
Inputs that were constants at plan time were uploaded then; the values passed for them are ignored."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeGuard

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.registry import KernelFactory, KernelPredicate, register_kernel

Types = Sequence["TensorType | None"]
Values = Sequence["np.ndarray | None"]

MAX_ELEMENTS = 2**31 - 1
"""Kernels index with 32-bit ints: no tensor may hold more elements."""


class GpuStep:
    """A prepared step of a GPU backend: ``launch`` runs on device tensors; ``device_inputs`` are the
    argument positions copied to the device per run (the others are plan-time constants or host
    values such as Split's sizes). Each backend names its tensor type in :meth:`run_device`."""

    __slots__ = ("device", "device_inputs", "launch")

    def __init__(self, device: Any, launch: Callable[..., Any], device_inputs: Sequence[int]) -> None:
        self.device = device
        self.launch = launch
        self.device_inputs = frozenset(device_inputs)

    def run_device(self, *args: Any) -> Any:
        raise NotImplementedError

    def __call__(self, *args: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        result = self.run_device(*args)
        if isinstance(result, tuple):
            return tuple(r.get() for r in result)
        return result.get()


def backend_kernel(
    backend: str,
) -> Callable[..., Callable[[KernelFactory], KernelFactory]]:
    """``register_kernel`` bound to ``backend`` ("opencl", "cuda")."""

    def kernel(
        op: str, *, when: KernelPredicate | None = None, priority: int = 0, name: str | None = None
    ) -> Callable[[KernelFactory], KernelFactory]:
        return register_kernel(op, backend=backend, when=when, priority=priority, name=name)

    return kernel


def is_float32(t: TensorType | None, rank: int | tuple[int, ...] | None = None) -> TypeGuard[TensorType]:
    """A float32 tensor of known shape (and of the given rank(s)) that 32-bit indices can address."""
    if t is None or t.dtype != "float32" or t.shape is None or not t.is_concrete:
        return False
    if rank is not None and len(t.shape) not in ((rank,) if isinstance(rank, int) else rank):
        return False
    return int(np.prod(t.dims, dtype=np.int64)) <= MAX_ELEMENTS


def shape_of(t: TensorType | None) -> tuple[int, ...]:
    assert t is not None
    return t.dims


def variable_inputs(node: Node, values: Values, indices: Sequence[int]) -> list[int]:
    """Of ``indices``, the inputs that are present and not constants (copied to the device per run)."""
    return [i for i in indices if i < len(node.inputs) and node.inputs[i] and values[i] is None]


def plan_constant(values: Values, index: int) -> np.ndarray | None:
    """Input ``index`` if it is a plan-time constant (to upload once); None otherwise."""
    return values[index] if index < len(values) else None


def either(constant: Any, value: Any) -> Any:
    """The plan-time upload of an input if there is one, else the value passed at run time."""
    return value if constant is None else constant
