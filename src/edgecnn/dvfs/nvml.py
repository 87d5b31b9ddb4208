"""NVIDIA GPU clocks through NVML, read only: edgecnn never changes a GPU's clocks (on a shared
machine that would change everyone's results), so a sweep or the governor only reports them."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from edgecnn.energy import NvmlMeter
from edgecnn.errors import DeviceError

CLOCK_GRAPHICS, CLOCK_MEMORY = 0, 2  # nvmlClockType_t


@dataclass(frozen=True)
class GpuClocks:
    describes: str
    graphics_mhz: int
    memory_mhz: int
    max_graphics_mhz: int


def gpu_clocks(index: int = 0) -> GpuClocks:
    """The current and the highest graphics clock and the memory clock of GPU ``index``."""
    meter = NvmlMeter(index)
    lib, handle = meter.lib, meter.handle

    def query(function: str, kind: int) -> int:
        value = ctypes.c_uint()
        status = getattr(lib, function)(handle, kind, ctypes.byref(value))
        if status != 0:
            raise DeviceError(f"NVML error {status} in {function} for {meter.describes}")
        return int(value.value)

    return GpuClocks(
        describes=meter.describes,
        graphics_mhz=query("nvmlDeviceGetClockInfo", CLOCK_GRAPHICS),
        memory_mhz=query("nvmlDeviceGetClockInfo", CLOCK_MEMORY),
        max_graphics_mhz=query("nvmlDeviceGetMaxClockInfo", CLOCK_GRAPHICS),
    )
