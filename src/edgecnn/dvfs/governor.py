"""Algorithm 5.1 as a loop: every period a load sample (the mean utilisation of the governed CPUs,
read by edgecnn.monitor's LoadSampler, or a recorded trace replayed), the scene classifier's
verdict, and on a change of verdict the governed domains pinned to their highest level (the CNN
scene) or handed back to the default governor (anything else). Without a FrequencyControl
(``--dry-run``) the decisions are only logged."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from edgecnn.dvfs.classifier import Decision, SceneClassifier
from edgecnn.dvfs.control import FrequencyControl
from edgecnn.dvfs.domains import CPUFREQ_ROOT
from edgecnn.dvfs.sysfs import read_int
from edgecnn.dvfs.traces import LoadTrace

Sample = tuple[float, float]  # seconds since the start, load in percent


def live_samples(
    period: float,
    cpus: Sequence[int] | None,
    *,
    cpufreq_root: Path = CPUFREQ_ROOT,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> Iterator[Sample]:
    """The governed CPUs' mean utilisation every ``period`` on deadlines (a late sample skips the
    periods it missed rather than bunching up); endless. Where cpufreq shows each core's current
    and highest frequency, the load is frequency-invariant (busy share x current / highest, as
    schedutil counts it), so that it compares with a template recorded at another frequency."""
    from edgecnn.dvfs.extra import require
    from edgecnn.monitor.load import LoadSampler

    require("psutil")
    sampler = LoadSampler(cpufreq_root=cpufreq_root)
    chosen = list(range(sampler.cores)) if cpus is None else list(cpus)
    top = highest_mhz(cpufreq_root, chosen) if sampler.freq_files is not None else None
    start = clock()
    tick = 1
    while True:
        sleep(max(0.0, start + tick * period - clock()))
        now = clock() - start
        sample = sampler.sample(now)
        loads = [sample.cpu_percent[c] for c in chosen]
        if top is not None and sample.cpu_mhz is not None:
            loads = [load * min(1.0, sample.cpu_mhz[c] / peak) for load, c, peak in zip(loads, chosen, top)]
        yield now, sum(loads) / len(loads)
        tick = max(tick + 1, int(now / period) + 1)


def highest_mhz(root: Path, cpus: Sequence[int]) -> list[float] | None:
    """Each CPU's cpuinfo_max_freq in MHz; None where one is missing (the load stays as measured)."""
    files = [root / f"cpu{c}" / "cpufreq" / "cpuinfo_max_freq" for c in cpus]
    if not all(f.is_file() for f in files):
        return None
    return [read_int(f) / 1000 for f in files]


def replayed_samples(
    trace: LoadTrace, *, speed: float = 1.0, sleep: Callable[[float], object] = time.sleep
) -> Iterator[Sample]:
    """A recorded trace's samples at their recorded pace divided by ``speed`` (0: no waiting)."""
    origin = time.monotonic()
    first = float(trace.seconds[0])
    for seconds, load in zip(trace.seconds, trace.load):
        offset = float(seconds) - first
        if speed > 0:
            sleep(max(0.0, origin + offset / speed - time.monotonic()))
        yield offset, float(load)


@dataclass(frozen=True)
class GovernorReport:
    samples: int
    pins: int
    releases: int
    wall_s: float
    cpu_s: float  # the governor process's CPU time while it ran

    @property
    def cpu_share(self) -> float:
        """The governor's CPU use as a share of one core."""
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0


class Governor:
    """Feeds samples to the classifier and acts on each change of verdict, but never sooner than
    ``hold`` samples after the previous change: where a scene's distances straddle the threshold,
    the governor would otherwise switch frequencies as fast as the default governor it replaces."""

    def __init__(
        self,
        classifier: SceneClassifier,
        control: FrequencyControl | None,
        *,
        log: Callable[[str], object] = print,
        decisions: IO[str] | None = None,
        hold: int = 0,
    ) -> None:
        self.classifier = classifier
        self.hold = hold
        self._since_change = hold
        self.control = control
        self.log = log
        self.decisions = decisions
        self.pinned = False
        self.seconds = 0.0  # the last sample's time
        self.pins = 0
        self.releases = 0

    def step(self, seconds: float, load: float) -> Decision:
        decision = self.classifier.push(seconds, load)
        self.seconds = seconds
        if self.decisions is not None:
            record = {"t": round(seconds, 3), "load": round(load, 1), "dtw": round(decision.distance, 2)}
            self.decisions.write(json.dumps({**record, "cnn": decision.cnn}) + "\n")
        self._since_change += 1
        if decision.cnn != self.pinned and self._since_change > self.hold:
            self._since_change = 0
            self.pinned = decision.cnn
            verb = "pin to the highest frequency" if decision.cnn else "release to the default governor"
            dry = " (dry run)" if self.control is None else ""
            self.log(
                f"{seconds:9.2f} s  DTW {decision.distance:8.1f} "
                f"{'<' if decision.cnn else '>='} {self.classifier.threshold:g}: {verb}{dry}"
            )
            if decision.cnn:
                self.pins += 1
                if self.control is not None:
                    self.control.pin_max()
            else:
                self.releases += 1
                if self.control is not None:
                    self.control.release()
        return decision

    def run(self, samples: Iterable[Sample], *, stop: Callable[[], bool] = lambda: False) -> GovernorReport:
        """Runs until the samples end or ``stop()``; the report holds the governor's own CPU use."""
        wall0, cpu0 = time.monotonic(), time.process_time()
        count = 0
        for seconds, load in samples:
            self.step(seconds, load)
            count += 1
            if stop():
                break
        return GovernorReport(
            count, self.pins, self.releases, time.monotonic() - wall0, time.process_time() - cpu0
        )
