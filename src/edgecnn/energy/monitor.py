"""PowerMonitor: samples a meter in a background thread (every 50 ms by default, like seed 001's
Power Monitor app) and derives the figures seed 001 judges by: energy per inference, average
power, FPS, EDP = E x T, PPW = 1/E and PPJ = 1/EDP."""

from __future__ import annotations

import csv
import os
import threading
import time
from dataclasses import dataclass, field

from edgecnn.energy.meters import EnergyMeter


@dataclass(frozen=True)
class Sample:
    seconds: float  # since the monitor started
    joules: float  # cumulative
    watts: float  # average power since the previous sample


@dataclass(frozen=True)
class EnergyReport:
    meter: str
    measured: bool
    describes: str
    inferences: int
    seconds: float
    joules: float

    @property
    def joules_per_inference(self) -> float:
        return self.joules / self.inferences

    @property
    def seconds_per_inference(self) -> float:
        return self.seconds / self.inferences

    @property
    def average_watts(self) -> float:
        return self.joules / self.seconds if self.seconds > 0 else 0.0

    @property
    def fps(self) -> float:
        return self.inferences / self.seconds if self.seconds > 0 else 0.0

    @property
    def edp(self) -> float:
        """Energy-delay product of one inference (J x s): lower is better."""
        return self.joules_per_inference * self.seconds_per_inference

    @property
    def ppw(self) -> float:
        """Performance per watt as seed 001 defines it: inferences per joule (1 / E)."""
        return 1 / self.joules_per_inference if self.joules > 0 else float("inf")

    @property
    def ppj(self) -> float:
        """1 / EDP."""
        return 1 / self.edp if self.edp > 0 else float("inf")

    def to_dict(self) -> dict[str, object]:
        return {
            "meter": self.meter,
            "measured": self.measured,
            "describes": self.describes,
            "inferences": self.inferences,
            "seconds": self.seconds,
            "joules": self.joules,
            "joules_per_inference": self.joules_per_inference,
            "average_watts": self.average_watts,
            "fps": self.fps,
            "edp": self.edp,
            "ppw": self.ppw,
            "ppj": self.ppj,
        }


@dataclass
class PowerMonitor:
    """``with PowerMonitor(meter) as monitor: ...work...``; then ``monitor.report(n)``."""

    meter: EnergyMeter
    interval: float = 0.05
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _start: float = 0.0
    _start_joules: float = 0.0
    _end: float = 0.0
    _end_joules: float = 0.0

    def __enter__(self) -> PowerMonitor:
        if self.interval <= 0:
            raise ValueError(f"sampling interval must be positive, got {self.interval}")
        self._start = time.monotonic()
        self._start_joules = self.meter.energy_j()
        self.samples = [Sample(0.0, 0.0, 0.0)]
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample_loop, name="edgecnn-power-monitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._end = time.monotonic()
        self._end_joules = self.meter.energy_j() - self._start_joules
        self._append(self._end - self._start, self._end_joules)

    def _sample_loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._append(time.monotonic() - self._start, self.meter.energy_j() - self._start_joules)

    def _append(self, seconds: float, joules: float) -> None:
        last = self.samples[-1]
        span = seconds - last.seconds
        self.samples.append(
            Sample(seconds, joules, (joules - last.joules) / span if span > 0 else last.watts)
        )

    def report(self, inferences: int) -> EnergyReport:
        if inferences < 1:
            raise ValueError("report needs at least one inference")
        return EnergyReport(
            meter=self.meter.name,
            measured=self.meter.measured,
            describes=self.meter.describes,
            inferences=inferences,
            seconds=self._end - self._start,
            joules=self._end_joules,
        )

    def write_csv(self, path: str | os.PathLike[str]) -> None:
        """One row per sample: time (s), cumulative energy (J), average power since the last row (W)."""
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["seconds", "joules", "watts"])
            for s in self.samples:
                writer.writerow([f"{s.seconds:.4f}", f"{s.joules:.6f}", f"{s.watts:.4f}"])
