"""The CUDA step (kernels.gpu.step.GpuStep over CudaArrays, launched inside the device's context),
registration for the "cuda" backend, constants uploaded once, and the device a plan targets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from edgecnn.kernels.cuda.array import CudaArray, to_device, to_host
from edgecnn.kernels.cuda.runtime import CudaDevice, get_device
from edgecnn.kernels.gpu.step import GpuStep, Values, backend_kernel, plan_constant

BACKEND = "cuda"

Launch = Callable[..., "CudaArray | tuple[CudaArray, ...]"]

cuda_kernel = backend_kernel(BACKEND)
"""``register_kernel`` for the "cuda" backend."""


class CudaStep(GpuStep):
    """A prepared CUDA step: ``run_device`` takes numpy arrays, CuPy arrays or CudaArrays and returns
    CudaArrays (see kernels.gpu.step)."""

    __slots__ = ()

    device: CudaDevice

    def run_device(self, *args: Any) -> CudaArray | tuple[CudaArray, ...]:
        moved = [
            to_device(self.device, a) if i in self.device_inputs and a is not None else to_host(a)
            for i, a in enumerate(args)
        ]
        with self.device.cuda:
            return self.launch(*moved)


def constant_on_device(device: CudaDevice, values: Values, index: int) -> CudaArray | None:
    """Input ``index`` uploaded once if it is a plan-time constant; None otherwise."""
    value = plan_constant(values, index)
    return None if value is None else CudaArray.upload(device, value)


def device_for_plan() -> CudaDevice:
    """The CUDA device the plan being built targets."""
    return get_device()
