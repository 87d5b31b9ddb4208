"""Energy measurement (seed 001): meters over RAPL, NVML, hwmon and power_supply, an estimate
that says it is one, and a PowerMonitor that turns samples into E, power, FPS, EDP, PPW, PPJ."""

from edgecnn.energy.meters import (
    METERS,
    CpuTimeEstimate,
    EnergyMeter,
    HwmonMeter,
    NvmlMeter,
    PowerSupplyMeter,
    RaplMeter,
    open_meter,
)
from edgecnn.energy.monitor import EnergyReport, PowerMonitor, Sample

__all__ = [
    "METERS",
    "CpuTimeEstimate",
    "EnergyMeter",
    "EnergyReport",
    "HwmonMeter",
    "NvmlMeter",
    "PowerMonitor",
    "PowerSupplyMeter",
    "RaplMeter",
    "Sample",
    "open_meter",
]
