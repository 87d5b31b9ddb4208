"""The machine's load at one instant, as seed 001's Power Monitor app sampled it: utilisation per
core (psutil's CPU times, differenced between samples), each core's frequency where cpufreq
exposes it, the power of a measured meter from edgecnn.energy (never the estimate: a trace is the
governor's input and must hold measurements only), and NVIDIA GPUs' utilisation and power (NVML)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from edgecnn.energy import EnergyMeter, NvmlMeter, open_meter
from edgecnn.errors import DeviceError
from edgecnn.monitor.errors import require

CPUFREQ_ROOT = Path("/sys/devices/system/cpu")
MEASURED_CPU_METERS = ("rapl", "hwmon", "power_supply")


@dataclass(frozen=True)
class LoadSample:
    """One sample; ``None`` or empty where this machine has no such sensor."""

    seconds: float  # since the recorder started
    cpu_percent: tuple[float, ...]  # busy share of each core since the previous sample
    cpu_mhz: tuple[float, ...] | None  # current frequency of each core (cpufreq)
    watts: float | None  # average power of the measured meter since the previous sample
    gpu_percent: tuple[float, ...]
    gpu_watts: tuple[float, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "t": round(self.seconds, 4),
            "cpu": [round(p, 1) for p in self.cpu_percent],
            "mhz": None if self.cpu_mhz is None else [round(f) for f in self.cpu_mhz],
            "watts": None if self.watts is None else round(self.watts, 3),
            "gpu": [round(p, 1) for p in self.gpu_percent],
            "gpu_watts": [round(w, 2) for w in self.gpu_watts],
        }


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class NvmlGpu:
    """Utilisation (%) and power (W) of one NVIDIA GPU, over edgecnn.energy's NVML meter."""

    def __init__(self, meter: NvmlMeter) -> None:
        self.meter = meter

    def percent(self) -> float:
        rates = _Utilization()
        status = self.meter.lib.nvmlDeviceGetUtilizationRates(self.meter.handle, ctypes.byref(rates))
        if status != 0:
            raise DeviceError(f"NVML error {status} reading the utilisation of {self.meter.describes}")
        return float(rates.gpu)

    def watts(self) -> float:
        return self.meter.power_w()


def nvml_gpus() -> list[NvmlGpu]:
    """Every GPU NVML sees; none where the driver's library is absent."""
    try:
        first = NvmlMeter(0)
    except DeviceError:
        return []
    count = ctypes.c_uint()
    if first.lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
        return [NvmlGpu(first)]
    return [NvmlGpu(first), *(NvmlGpu(NvmlMeter(i)) for i in range(1, count.value))]


def measured_cpu_meter() -> EnergyMeter | None:
    """The first measured meter of the CPU side (RAPL, hwmon, power_supply); None without one."""
    for name in MEASURED_CPU_METERS:
        try:
            return open_meter(name)
        except DeviceError:
            continue
    return None


def cpufreq_files(root: Path, cores: int) -> list[Path] | None:
    """Each core's scaling_cur_freq (kHz), or None unless cpufreq exposes every core's."""
    files = [root / f"cpu{i}" / "cpufreq" / "scaling_cur_freq" for i in range(cores)]
    return files if all(f.is_file() for f in files) else None


class LoadSampler:
    """Reads a LoadSample on each ``sample`` call; utilisation and power cover the time since the
    previous call (the first call covers the time since the sampler was made)."""

    def __init__(
        self,
        *,
        meter: EnergyMeter | None = None,
        gpus: Sequence[NvmlGpu] = (),
        cpufreq_root: Path = CPUFREQ_ROOT,
        cpu_times: Callable[[], list[tuple[float, float]]] | None = None,
    ) -> None:
        self._cpu_times = cpu_times or self._psutil_cpu_times()
        self._last_times = self._cpu_times()
        self.cores = len(self._last_times)
        self.freq_files = cpufreq_files(cpufreq_root, self.cores)
        self.meter = meter
        self.gpus = list(gpus)
        self._last_joules = meter.energy_j() if meter is not None else 0.0
        self._last_seconds: float | None = None

    @classmethod
    def for_this_machine(cls) -> LoadSampler:
        """Every sensor found here: a measured CPU-side meter and NVML's GPUs when present."""
        return cls(meter=measured_cpu_meter(), gpus=nvml_gpus())

    @staticmethod
    def _psutil_cpu_times() -> Callable[[], list[tuple[float, float]]]:
        require("psutil")
        import psutil

        def busy_and_total() -> list[tuple[float, float]]:
            result = []
            for times in psutil.cpu_times(percpu=True):
                total = sum(times)
                idle = times.idle + getattr(times, "iowait", 0.0)
                result.append((total - idle, total))
            return result

        return busy_and_total

    def sample(self, seconds: float) -> LoadSample:
        times = self._cpu_times()
        percent = []
        for (busy, total), (last_busy, last_total) in zip(times, self._last_times):
            span = total - last_total
            percent.append(100.0 * (busy - last_busy) / span if span > 0 else 0.0)
        self._last_times = times
        return LoadSample(
            seconds=seconds,
            cpu_percent=tuple(percent),
            cpu_mhz=None if self.freq_files is None else tuple(_read_mhz(f) for f in self.freq_files),
            watts=self._watts(seconds),
            gpu_percent=tuple(gpu.percent() for gpu in self.gpus),
            gpu_watts=tuple(gpu.watts() for gpu in self.gpus),
        )

    def _watts(self, seconds: float) -> float | None:
        if self.meter is None:
            return None
        joules = self.meter.energy_j()
        last_seconds, self._last_seconds = self._last_seconds, seconds
        delta, self._last_joules = joules - self._last_joules, joules
        if last_seconds is None or seconds <= last_seconds:
            return None
        return delta / (seconds - last_seconds)


def _read_mhz(path: Path) -> float:
    try:
        return int(path.read_text().strip()) / 1000
    except (OSError, ValueError):
        return float("nan")
