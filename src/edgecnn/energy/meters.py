"""Energy meters: one interface over the sources a Linux or Android device may offer.

Every meter returns cumulative energy in joules since it was opened (``energy_j``), says what it
measures (``describes``) and whether the figure is a measurement or an estimate (``measured``).
Counter-based meters (RAPL, NVML, hwmon energy) read hardware counters and handle wrap-around;
power-based meters (hwmon power, power_supply) integrate instantaneous power between reads, so
they are only as good as the sampling (PowerMonitor samples every 50 ms, as seed 001 did).
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from edgecnn.errors import DeviceError


class EnergyMeter(Protocol):
    name: str
    measured: bool  # False: an estimate from a power model
    describes: str  # what the figure covers, e.g. "CPU package 0 (RAPL)"

    def energy_j(self) -> float:
        """Joules consumed since the meter was opened."""
        ...


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError) as exc:
        raise DeviceError(f"cannot read the energy counter {path}: {exc}") from None


def _int_reader(path: Path) -> Callable[[], int]:
    """A reader of the integer in ``path`` (an energy counter), bound to that path."""

    def read() -> int:
        return _read_int(path)

    return read


def _microwatt_reader(path: Path) -> Callable[[], float]:
    """A reader of the power in ``path`` (in µW), converted to watts."""

    def read() -> float:
        return _read_int(path) * 1e-6

    return read


@dataclass
class WrappingCounter:
    """A monotonic counter that wraps at ``wrap``; accumulates the increments (one wrap between
    reads at most, which holds when reads are much more frequent than the wrap period)."""

    read: Callable[[], int]
    wrap: int
    scale: float  # joules per count
    _last: int = field(init=False)
    _total: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._last = self.read()

    def joules(self) -> float:
        now = self.read()
        delta = now - self._last
        if delta < 0:
            delta += self.wrap
        self._total += delta
        self._last = now
        return self._total * self.scale


class RaplMeter:
    """Linux powercap / Intel-AMD RAPL: one counter per top-level zone (CPU packages), in µJ."""

    name = "rapl"
    measured = True

    def __init__(self, root: str | os.PathLike[str] = "/sys/class/powercap") -> None:
        zones = sorted(p for p in Path(root).glob("*rapl:*") if ":" in p.name and p.name.count(":") == 1)
        if not zones:
            raise DeviceError(f"no RAPL zones under {root}")
        self.counters: list[WrappingCounter] = []
        labels = []
        for zone in zones:
            wrap_path = zone / "max_energy_range_uj"
            wrap = _read_int(wrap_path) if wrap_path.exists() else 2**32
            self.counters.append(WrappingCounter(_int_reader(zone / "energy_uj"), wrap + 1, 1e-6))
            label = (zone / "name").read_text().strip() if (zone / "name").exists() else zone.name
            labels.append(label)
        self.describes = f"{', '.join(labels)} (RAPL energy counters)"

    def energy_j(self) -> float:
        return sum(c.joules() for c in self.counters)


class IntegratedPower:
    """Energy from power samples: trapezoids between successive reads."""

    def __init__(self, read_watts: Callable[[], float], clock: Callable[[], float] = time.monotonic) -> None:
        self.read_watts = read_watts
        self.clock = clock
        self._last_time = clock()
        self._last_watts = read_watts()
        self._joules = 0.0

    def joules(self) -> float:
        now, watts = self.clock(), self.read_watts()
        self._joules += 0.5 * (watts + self._last_watts) * (now - self._last_time)
        self._last_time, self._last_watts = now, watts
        return self._joules


class HwmonMeter:
    """hwmon sensors (e.g. the INA231 rails of an ODROID-XU3): energyN_input (µJ) when present,
    else powerN_input (µW) integrated over time."""

    name = "hwmon"
    measured = True

    def __init__(
        self, root: str | os.PathLike[str] = "/sys/class/hwmon", clock: Callable[[], float] = time.monotonic
    ) -> None:
        energy = sorted(Path(root).glob("hwmon*/energy*_input"))
        power = sorted(Path(root).glob("hwmon*/power*_input"))
        if not energy and not power:
            raise DeviceError(f"no hwmon energy or power sensors under {root}")
        self.sources: list[WrappingCounter | IntegratedPower] = []
        if energy:
            self.sources = [WrappingCounter(_int_reader(p), 2**63, 1e-6) for p in energy]
            files = energy
        else:
            self.sources = [IntegratedPower(_microwatt_reader(p), clock) for p in power]
            files = power
        names = [_sensor_label(f) for f in files]
        kind = "energy counters" if energy else "power sensors, integrated"
        self.describes = f"{', '.join(names)} (hwmon {kind})"

    def energy_j(self) -> float:
        return sum(s.joules() for s in self.sources)


def _sensor_label(path: Path) -> str:
    label = path.with_name(path.name.replace("_input", "_label"))
    chip = path.parent / "name"
    text = label.read_text().strip() if label.exists() else path.name
    return f"{chip.read_text().strip()}/{text}" if chip.exists() else text


class PowerSupplyMeter:
    """Linux/Android power_supply (battery or USB): voltage_now (µV) x current_now (µA),
    integrated over time; power_now (µW) when the driver gives it directly."""

    name = "power_supply"
    measured = True

    def __init__(
        self,
        root: str | os.PathLike[str] = "/sys/class/power_supply",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        supplies = [
            p
            for p in sorted(Path(root).glob("*"))
            if (p / "power_now").exists() or ((p / "voltage_now").exists() and (p / "current_now").exists())
        ]
        if not supplies:
            raise DeviceError(f"no power_supply with voltage/current or power readings under {root}")
        supply = supplies[0]

        def watts() -> float:
            if (supply / "power_now").exists():
                return abs(_read_int(supply / "power_now")) * 1e-6
            return abs(_read_int(supply / "voltage_now") * _read_int(supply / "current_now")) * 1e-12

        self.source = IntegratedPower(watts, clock)
        self.describes = f"{supply.name} (power_supply voltage x current, integrated)"

    def energy_j(self) -> float:
        return self.source.joules()


class NvmlMeter:
    """NVIDIA GPUs through NVML (the driver's libnvidia-ml, called with ctypes: no Python package
    needed): the board's total-energy counter in mJ (Volta and later)."""

    name = "nvml"
    measured = True

    def __init__(self, index: int = 0) -> None:
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as exc:
            raise DeviceError(f"NVML is not available (libnvidia-ml.so.1: {exc})") from None
        self._check(self.lib.nvmlInit_v2(), "nvmlInit")
        self.handle = ctypes.c_void_p()
        self._check(self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.handle)), f"GPU {index}")
        name = ctypes.create_string_buffer(96)
        self._check(self.lib.nvmlDeviceGetName(self.handle, name, 96), "nvmlDeviceGetName")
        self.counter = WrappingCounter(self._millijoules, 2**64, 1e-3)
        self.describes = f"GPU {index} {name.value.decode(errors='replace')} (NVML total energy counter)"

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            raise DeviceError(f"NVML error {status} in {what}")

    def _millijoules(self) -> int:
        value = ctypes.c_ulonglong()
        self._check(
            self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle, ctypes.byref(value)), "energy counter"
        )
        return int(value.value)

    def power_w(self) -> float:
        milliwatts = ctypes.c_uint()
        self._check(self.lib.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(milliwatts)), "power usage")
        return milliwatts.value / 1000

    def energy_j(self) -> float:
        return self.counter.joules()


class CpuTimeEstimate:
    """An estimate, always labelled as one: this process's CPU seconds x a declared watts per busy
    core, plus idle watts x wall time. Defaults are a guess for a small ARM/x86 board; pass the
    figures of your device's datasheet."""

    name = "estimate"
    measured = False

    def __init__(self, watts_per_busy_core: float = 2.0, idle_watts: float = 0.0) -> None:
        if watts_per_busy_core < 0 or idle_watts < 0:
            raise DeviceError("power model figures must be non-negative")
        self.busy = watts_per_busy_core
        self.idle = idle_watts
        self._cpu0, self._wall0 = time.process_time(), time.monotonic()
        self.describes = (
            f"estimate: CPU time x {watts_per_busy_core:g} W per busy core + {idle_watts:g} W idle "
            "(no energy sensor found)"
        )

    def energy_j(self) -> float:
        return (time.process_time() - self._cpu0) * self.busy + (time.monotonic() - self._wall0) * self.idle


METERS: dict[str, Callable[[], EnergyMeter]] = {
    "rapl": RaplMeter,
    "nvml": NvmlMeter,
    "hwmon": HwmonMeter,
    "power_supply": PowerSupplyMeter,
    "estimate": CpuTimeEstimate,
}


AUTO_ORDER = {
    "cpu": ("rapl", "hwmon", "power_supply", "estimate"),
    "cuda": ("nvml",),
    "opencl": ("hwmon", "power_supply", "estimate"),  # a GPU's own rail, where the board exposes one
}
"""Meters that cover each kind of device, best first (a GPU board meter says nothing of the CPU)."""


def _open(name: str, device: str) -> EnergyMeter:
    """Meter ``name`` for ``device``: NVML reads the board of the GPU ``cuda:N`` names (NVML counts
    GPUs in PCI order; set CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA counts them the same way)."""
    kind, _, index = device.partition(":")
    if name == "nvml" and kind == "cuda":
        return NvmlMeter(int(index or 0))
    return METERS[name]()


def open_meter(name: str = "auto", device: str = "cpu") -> EnergyMeter:
    """The named meter, or with "auto" the first that works here for ``device`` (the estimate last)."""
    if name != "auto":
        if name not in METERS:
            raise DeviceError(f"unknown energy meter {name!r} (known: auto, {', '.join(METERS)})")
        return _open(name, device)
    kind = device.split(":")[0]
    candidates = AUTO_ORDER.get(kind)
    if candidates is None:
        raise DeviceError(f"no energy meter is known for device {device!r}; name one with meter=")
    failures = []
    for candidate in candidates:
        try:
            return _open(candidate, device)
        except DeviceError as exc:
            failures.append(str(exc))
    raise DeviceError(f"no energy meter works for {device!r}: {'; '.join(failures)}")
