"""Frequency sweeps (seed 001's Fig. 5.4 and Table 5.1): the figures of N inferences at each
frequency level and under the default governor, with the seed's columns relative to the default.

Two sources of figures, never mixed in one table: ``measured`` (the level pinned through
FrequencyControl, time from the clock, energy from a measured meter) and ``simulated`` (where
frequencies or energy cannot be measured: the run is timed once on this machine, taken to be the
top level, and replayed through the processor model at each level and under the default rule)."""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from edgecnn.dvfs.control import FrequencyControl
from edgecnn.dvfs.journal import write_atomically
from edgecnn.dvfs.simulate import Fixed, Level, Policy, ProcessorModel, Schedutil, replay
from edgecnn.energy import EnergyMeter, EnergyReport, PowerMonitor

DEFAULT = "default governor"
STEADY_PERIODS = 200  # 10 s at 50 ms: the default rule's start at the top level weighs 0.5%


@dataclass(frozen=True)
class SweepRow:
    """One policy's figures: a measured EnergyReport, or one the processor model produced."""

    policy: str  # "default governor" or "fixed <MHz> MHz"
    mhz: float | None
    report: EnergyReport

    @property
    def source(self) -> str:
        return "measured" if self.report.measured else "simulated"


def simulated_report(inferences: int, seconds: float, joules: float, describes: str) -> EnergyReport:
    """The figures of a replay in the EnergyReport that a measurement gives, marked as not measured."""
    return EnergyReport("simulated", False, describes, inferences, seconds, joules)


COLUMNS = (
    "policy", "mhz", "source", "time_ms", "fps", "energy_j", "power_w", "edp_js", "ppw",
    "performance_gain", "energy_saving", "power_saving",
)  # fmt: skip
"""Table 5.1's columns (time per inference, FPS, energy per inference, power, EDP, then the gain in
FPS and the savings in energy and power relative to the default governor), plus PPW."""


def table(rows: Sequence[SweepRow]) -> list[dict[str, str]]:
    """The rows as strings under COLUMNS; the relative columns are against the default row."""
    default = next((r for r in rows if r.policy == DEFAULT), None)
    out = []
    for row in rows:
        r = row.report
        relative = ["", "", ""]
        if default is not None and row is not default:
            d = default.report
            relative = [
                f"{r.fps / d.fps - 1:+.2%}",
                f"{1 - r.joules_per_inference / d.joules_per_inference:+.2%}",
                f"{1 - r.average_watts / d.average_watts:+.2%}",
            ]
        values = [
            row.policy,
            "" if row.mhz is None else f"{row.mhz:.0f}",
            row.source,
            f"{r.seconds_per_inference * 1e3:.2f}",
            f"{r.fps:.3f}",
            f"{r.joules_per_inference:.4g}",
            f"{r.average_watts:.3f}",
            f"{r.edp:.4g}",
            f"{r.ppw:.4g}",
            *relative,
        ]
        out.append(dict(zip(COLUMNS, values)))
    return out


def write_csv(rows: Sequence[SweepRow], path: Path) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows(table(rows))
    write_atomically(path, buffer.getvalue())


def plot(rows: Sequence[SweepRow], path: Path, title: str) -> None:
    """Fig. 5.4: time, energy and power per inference against frequency, the default governor's
    as dashed lines; written atomically as PNG."""
    from edgecnn.dvfs.extra import require

    require("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fixed = sorted((r for r in rows if r.mhz is not None), key=lambda r: r.mhz or 0.0)
    default = next((r for r in rows if r.policy == DEFAULT), None)
    mhz = [r.mhz for r in fixed]
    figure, axes = plt.subplots(1, 3, figsize=(11, 3.4), dpi=110)
    series = (
        ("time per inference (ms)", lambda r: r.report.seconds_per_inference * 1e3),
        ("energy per inference (J)", lambda r: r.report.joules_per_inference),
        ("average power (W)", lambda r: r.report.average_watts),
    )
    for axis, (label, value) in zip(axes, series):
        axis.plot(mhz, [value(r) for r in fixed], marker="o")
        if default is not None:
            axis.axhline(value(default), linestyle="--", color="grey", label=DEFAULT)
            axis.legend(fontsize=7)
        axis.set_xlabel("frequency (MHz)")
        axis.set_title(label, fontsize=9)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    write_atomically(path, buffer.getvalue())


def model_for_levels(model: ProcessorModel, khz: Sequence[int]) -> ProcessorModel:
    """``model`` moved onto another frequency table: each level takes the voltage the model has
    at the same fraction of its top frequency (interpolated), and the same power at the top."""
    top = max(khz) / 1000
    fractions = [lv.mhz / model.levels[-1].mhz for lv in model.levels]
    volts = [lv.volts for lv in model.levels]
    levels = tuple(Level(f / 1000, float(np.interp(f / 1000 / top, fractions, volts))) for f in sorted(khz))
    ceff = model.ceff * model.levels[-1].mhz / top
    return replace(model, name=f"{model.name} on {len(levels)} levels to {top:.0f} MHz", levels=levels, ceff=ceff,
                   speed=None)  # fmt: skip


def simulated_rows(
    model: ProcessorModel, inferences: int, seconds: float, busy_share: float, period: float = 0.05
) -> list[SweepRow]:
    """The rows of a run measured here (``seconds`` for ``inferences``, ``busy_share`` of all cores
    busy) as a steady loop: at least STEADY_PERIODS periods of that load, replayed at every level of
    ``model`` and under the schedutil rule, the figures scaled back to ``inferences``."""
    samples = max(STEADY_PERIODS, math.ceil(seconds / period))
    load = np.full(samples, 100 * min(1.0, max(0.0, busy_share)))
    scale = seconds / (samples * period)  # the loop replayed is 1/scale runs long
    policies: list[tuple[str, float | None, Callable[[], Policy]]] = [(DEFAULT, None, Schedutil)]
    for index, level in enumerate(model.levels):
        policies.append((f"fixed {level.mhz:.0f} MHz", level.mhz, functools.partial(Fixed, index)))
    rows = []
    for name, mhz, make in policies:
        run = replay(load, period, model, make(), inferences=inferences)
        report = simulated_report(inferences, run.seconds * scale, run.joules * scale, model.name)
        rows.append(SweepRow(name, mhz, report))
    return rows


def measured_rows(
    run: Callable[[], object],
    control: FrequencyControl,
    levels_khz: Sequence[int],
    meter: EnergyMeter,
    *,
    inferences: int,
    warmup: int,
    progress: Callable[[str], object] = lambda label: None,
) -> list[SweepRow]:
    """The default governor's row, then one per level with every domain of ``control`` pinned
    there; ``run`` does one inference. The settings are restored after each level, and
    ``progress`` is called with the level's label once it is measured."""
    rows = []
    for khz in [None, *levels_khz]:
        label = DEFAULT if khz is None else f"fixed {khz / 1000:.0f} MHz"
        if khz is not None:
            for domain in control.domains:
                control.pin(domain, khz)
        for _ in range(warmup):
            run()
        with PowerMonitor(meter) as monitor:
            for _ in range(inferences):
                run()
        report = monitor.report(inferences)
        control.release()
        mhz = None if khz is None else khz / 1000
        rows.append(SweepRow(label, mhz, report))
        progress(label)
    return rows
