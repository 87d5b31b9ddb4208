"""A processor model and a replay of recorded load traces under frequency policies, so that the
governor can be studied where frequencies cannot be set.

Replay: each 50 ms sample of a trace is busy time (its load, the share of all cores busy, at the
level the trace was recorded at, taken to be the top one) followed by idle time; replayed at a
lower level the busy time stretches and the idle time does not, as for a loop that computes, then
waits for its next frame. The policy sees the utilisation this produces and chooses the next
period's level, one period late as a real governor does. A run ends when the trace's last period
is replayed: its time, energy (power integrated per period), average power and EDP are per
inference when the trace holds inference events.

Power: P = busy cores x C_eff x V^2 x f + P_static x V / V_top, with V(f) from the model's levels.
The default model, EXYNOS5422_A15, is seed 001's ODROID-XU3 big cluster: docs/governor.md gives
each number's source."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from edgecnn.dvfs.classifier import SceneClassifier
from edgecnn.errors import ConfigurationError


@dataclass(frozen=True)
class Level:
    mhz: float
    volts: float


@dataclass(frozen=True)
class ProcessorModel:
    name: str
    levels: tuple[Level, ...]  # lowest first
    cores: int
    ceff: float  # W per busy core per V^2 per GHz (activity x switched capacitance)
    static_w: float  # leakage of the whole cluster at the top level's voltage
    speed: tuple[float, ...] | None = None  # throughput per level relative to the top; None: f / f_top
    source: str = ""

    def __post_init__(self) -> None:
        mhz = [lv.mhz for lv in self.levels]
        if not mhz or mhz != sorted(mhz) or self.cores < 1 or self.ceff < 0 or self.static_w < 0:
            raise ConfigurationError(f"processor model {self.name}: levels ascending, cores 1+, powers >= 0")
        if self.speed is not None and len(self.speed) != len(self.levels):
            raise ConfigurationError(f"processor model {self.name}: one speed per level")

    @property
    def top(self) -> int:
        return len(self.levels) - 1

    def throughput(self, level: int) -> float:
        """Work per second at ``level`` relative to the top level."""
        if self.speed is not None:
            return self.speed[level]
        return self.levels[level].mhz / self.levels[-1].mhz

    def power(self, level: int, busy_cores: float) -> float:
        lv = self.levels[level]
        dynamic = busy_cores * self.ceff * lv.volts**2 * lv.mhz / 1000
        return dynamic + self.static_w * lv.volts / self.levels[-1].volts

    def nearest(self, mhz: float) -> int:
        return int(np.argmin([abs(lv.mhz - mhz) for lv in self.levels]))


SEED_CPU_BUSY_W = 52.12 / 11.94  # seed 001 Fig. 4.1: one CNN inference on the XU3's CPU, all cores
SEED_CPU_LIGHT_W = 0.71  # seed 001 Table 5.2: the CPU's power while the GPU ran the CNN
A15_VOLTS = (  # Linux arch/arm/boot/dts/exynos5420.dtsi, cluster_a15_opp_table (MHz, V)
    (700, 0.9125), (800, 0.9375), (900, 0.9625), (1000, 0.9875), (1100, 1.0125), (1200, 1.0375),
    (1300, 1.0625), (1400, 1.1125), (1500, 1.1375), (1600, 1.175), (1700, 1.2125), (1800, 1.25),
)  # fmt: skip

EXYNOS5422_A15 = ProcessorModel(
    name="Exynos 5422 Cortex-A15 cluster (model)",
    levels=tuple(Level(mhz, volts) for mhz, volts in A15_VOLTS),
    cores=4,
    ceff=(SEED_CPU_BUSY_W - SEED_CPU_LIGHT_W) / (4 * 1.25**2 * 1.8),
    static_w=SEED_CPU_LIGHT_W,
    source="levels and voltages: Linux exynos5420.dtsi A15 OPP table; power: seed 001 Fig. 4.1 and Table 5.2",
)


class Policy:
    """Chooses the level of the next period from the utilisation (%) of the one just run."""

    name = "policy"

    def start_level(self, model: ProcessorModel) -> int:
        """The level of the first period (the top one unless the policy fixes another)."""
        return model.top

    def next_level(self, model: ProcessorModel, level: int, seconds: float, utilisation: float) -> int:
        raise NotImplementedError


@dataclass
class Fixed(Policy):
    level: int

    def __post_init__(self) -> None:
        self.name = f"fixed level {self.level}"

    def start_level(self, model: ProcessorModel) -> int:
        return self.level

    def next_level(self, model: ProcessorModel, level: int, seconds: float, utilisation: float) -> int:
        return self.level


@dataclass
class Schedutil(Policy):
    """Linux schedutil's rule: the next frequency is ``headroom`` x the top frequency x the
    frequency-invariant utilisation (busy share scaled by current / top frequency), rounded up to a
    level; it moves only every ``interval`` periods (its rate limit, here coarser than the kernel's
    because a trace has one sample per period)."""

    headroom: float = 1.25
    interval: int = 1
    _count: int = 0

    name = "default (schedutil rule)"

    def next_level(self, model: ProcessorModel, level: int, seconds: float, utilisation: float) -> int:
        self._count += 1
        if self._count % self.interval:
            return level
        invariant = utilisation / 100 * model.throughput(level)
        wanted = self.headroom * invariant * model.levels[-1].mhz
        for index, lv in enumerate(model.levels):
            if lv.mhz >= wanted:
                return index
        return model.top


@dataclass
class SceneAware(Policy):
    """Algorithm 5.1: the top level while the classifier sees the CNN scene, else ``default``. The
    classifier gets the frequency-invariant load (busy share x the level's speed relative to the
    top), as the live governor does: at a low level any work looks busier than the template."""

    classifier: SceneClassifier
    default: Policy = field(default_factory=Schedutil)

    name = "scene-aware (Algorithm 5.1)"

    def next_level(self, model: ProcessorModel, level: int, seconds: float, utilisation: float) -> int:
        chosen = self.default.next_level(model, level, seconds, utilisation)
        invariant = utilisation * model.throughput(level)
        return model.top if self.classifier.push(seconds, invariant).cnn else chosen


@dataclass(frozen=True)
class Replay:
    policy: str
    period: float
    levels: np.ndarray  # level index per period
    utilisation: np.ndarray  # % of all cores busy per period
    watts: np.ndarray
    positions: np.ndarray  # per period, the recorded samples replayed by its end
    seconds: float  # until the trace's work was done
    joules: float
    inferences: int  # 0: the trace records none

    @property
    def average_watts(self) -> float:
        return self.joules / self.seconds

    @property
    def fps(self) -> float:
        return self.inferences / self.seconds if self.inferences else math.nan

    @property
    def per_inference(self) -> tuple[float, float]:
        """(seconds, joules) per inference; the whole run's when the trace has no inferences."""
        n = self.inferences or 1
        return self.seconds / n, self.joules / n

    @property
    def edp(self) -> float:
        seconds, joules = self.per_inference
        return seconds * joules

    def switches_per_second(self) -> float:
        """Level changes per second: the ping-pong of seed 001's Fig. 5.3."""
        return float(np.count_nonzero(np.diff(self.levels))) / self.seconds


def replay(
    load: np.ndarray,
    period: float,
    model: ProcessorModel,
    policy: Policy,
    *,
    inferences: int = 0,
    start_level: int | None = None,
) -> Replay:
    """Runs the recorded ``load`` (% of all cores, one value per ``period``) through ``model`` under
    ``policy``. Each recorded period is its busy time (load x period, at the top level) then its
    idle time; the busy part stretches by the level's slowness, the idle part (waiting for a frame,
    for I/O) does not, so a CNN loop that is busy most of the time slows down nearly in proportion
    and a mostly idle scene hardly at all."""
    if period <= 0 or len(load) == 0:
        raise ConfigurationError("a replay needs a positive period and at least one sample")
    busy = np.nan_to_num(np.clip(np.asarray(load, dtype=np.float64), 0, 100)) / 100 * period
    level = policy.start_level(model) if start_level is None else start_level
    position, left_busy, left_idle = 0, busy[0], period - busy[0]
    levels, shares, watts, positions = [], [], [], []
    seconds = joules = 0.0
    while position < len(busy):
        budget, ran = period, 0.0
        speed = model.throughput(level)
        while budget > 1e-12 and position < len(busy):
            take = min(left_busy / speed, budget)
            left_busy -= take * speed
            budget -= take
            ran += take
            if left_busy > 1e-12:
                break
            idle = min(left_idle, budget)
            left_idle -= idle
            budget -= idle
            if left_idle > 1e-12:
                break
            position += 1
            if position < len(busy):
                left_busy, left_idle = busy[position], period - busy[position]
        used = period - budget if position >= len(busy) else period
        share = ran / period
        power = model.power(level, share * model.cores)
        seconds += used
        joules += power * used
        levels.append(level)
        shares.append(100 * share)
        watts.append(power)
        positions.append(position)
        level = policy.next_level(model, level, seconds, 100 * share)
    return Replay(
        policy=policy.name,
        period=period,
        levels=np.array(levels),
        utilisation=np.array(shares),
        watts=np.array(watts),
        positions=np.array(positions),
        seconds=seconds,
        joules=joules,
        inferences=inferences,
    )
