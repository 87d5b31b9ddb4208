"""The OpenCL step (kernels.gpu.step.GpuStep over DeviceArrays), registration for the "opencl"
backend, constants uploaded once, and the device a plan targets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from edgecnn.kernels.gpu.step import GpuStep, Values, backend_kernel, plan_constant
from edgecnn.kernels.opencl.array import DeviceArray, to_device, to_host
from edgecnn.kernels.opencl.runtime import OpenCLDevice, get_device

BACKEND = "opencl"

Launch = Callable[..., "DeviceArray | tuple[DeviceArray, ...]"]

opencl_kernel = backend_kernel(BACKEND)
"""``register_kernel`` for the "opencl" backend."""


class OpenCLStep(GpuStep):
    """A prepared OpenCL step: ``run_device`` takes numpy arrays or DeviceArrays and returns
    DeviceArrays (see kernels.gpu.step)."""

    __slots__ = ()

    device: OpenCLDevice

    def run_device(self, *args: Any) -> DeviceArray | tuple[DeviceArray, ...]:
        moved = [
            to_device(self.device, a) if i in self.device_inputs and a is not None else to_host(a)
            for i, a in enumerate(args)
        ]
        return self.launch(*moved)


def constant_on_device(device: OpenCLDevice, values: Values, index: int) -> DeviceArray | None:
    """Input ``index`` uploaded once if it is a plan-time constant; None otherwise."""
    value = plan_constant(values, index)
    return None if value is None else DeviceArray.upload(device, value)


def device_for_plan() -> OpenCLDevice:
    """The OpenCL device the plan being built targets."""
    return get_device()
