"""Load traces: the 50 ms sample rows of a monitor ``--trace`` CSV (edgecnn.monitor.trace) as one
load series in percent, and their resampling onto a regular grid (jittered or missing samples).

The ``system`` load is the mean busy share of the chosen cores (``cpuN_pct``), what a governor
sees of the whole machine. Scenario traces also carry the scenario's own process tree: ``scene`` (``scene_pct``, its CPU use as a share of all cores) and ``demand``
(``demand_pct``, CPU use plus time spent runnable but waiting for a core): on a machine shared
with other work, the load the scenario would put on a machine of its own."""

from __future__ import annotations

import contextlib
import csv
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgecnn.errors import InputError

CORE_COLUMN = re.compile(r"cpu(\d+)_pct$")
SCENE_COLUMNS = {"scene": "scene_pct", "demand": "demand_pct"}
SOURCES = ("system", *SCENE_COLUMNS)


@dataclass(frozen=True)
class LoadTrace:
    """Sample times (s) and loads (%), in time order."""

    seconds: np.ndarray
    load: np.ndarray
    source: str  # where it comes from, e.g. "trace.csv: mean of cpu0_pct, cpu1_pct"
    inferences: np.ndarray = field(default_factory=lambda: np.zeros(0))  # inference_end times

    def __len__(self) -> int:
        return len(self.load)

    def between(self, start: float, stop: float) -> LoadTrace:
        keep = (self.seconds >= start) & (self.seconds < stop)
        ends = self.inferences[(self.inferences >= start) & (self.inferences < stop)]
        return LoadTrace(self.seconds[keep], self.load[keep], self.source, ends)


def read_trace(path: Path, *, source: str = "system", cpus: Sequence[int] | None = None) -> LoadTrace:
    """The trace's sample rows as one series: ``system`` averages the ``cpuN_pct`` columns (of
    ``cpus``, default all), ``scene`` and ``demand`` read their column. Unreadable cells are gaps."""
    if source not in SOURCES:
        raise InputError(f"unknown load source {source!r} (known: {', '.join(SOURCES)})")
    try:
        with open(path, newline="") as handle:
            rows = list(csv.reader(handle))
    except OSError as exc:
        raise InputError(f"cannot read the trace {path}: {exc.strerror or exc}") from None
    if not rows or rows[0][:2] != ["time_s", "kind"]:
        raise InputError(f"{path} is not a load trace (its header must start with time_s,kind)")
    header = rows[0]
    if source in SCENE_COLUMNS:
        name = SCENE_COLUMNS[source]
        if name not in header:
            raise InputError(f"{path} has no {name} column (only scenario traces carry it)")
        columns = [header.index(name)]
        described = name
    else:
        cores = {int(m.group(1)): i for i, name in enumerate(header) if (m := CORE_COLUMN.match(name))}
        wanted = sorted(cores) if cpus is None else list(cpus)
        missing = [c for c in wanted if c not in cores]
        if missing or not wanted:
            raise InputError(f"{path} has no cpuN_pct column for CPU(s) {missing or 'any'}")
        columns = [cores[c] for c in wanted]
        described = "mean of " + ", ".join(f"cpu{c}_pct" for c in wanted)
    seconds, load, ends = [], [], []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) >= 2 and row[1] == "inference_end":
            with contextlib.suppress(ValueError):
                ends.append(float(row[0]))
        if len(row) < len(header) or row[1] != "sample":
            continue
        try:
            seconds.append(float(row[0]))
        except ValueError:
            raise InputError(f"{path}:{number}: unreadable time {row[0]!r}") from None
        try:
            load.append(float(np.mean([float(row[i]) for i in columns])))
        except ValueError:
            load.append(math.nan)
    if len(load) < 2:
        raise InputError(f"{path} holds fewer than two load samples")
    order = np.argsort(seconds, kind="stable")
    return LoadTrace(
        np.asarray(seconds)[order],
        np.asarray(load, dtype=np.float64)[order],
        f"{path.name}: {described}",
        np.asarray(sorted(ends)),
    )


def regular(seconds: np.ndarray, load: np.ndarray, period: float, count: int) -> np.ndarray | None:
    """The ``count`` loads on a grid of ``period`` ending at the last sample, interpolated from
    samples that came early, late or not at all; None when the samples do not cover the grid or a
    gap is longer than a quarter of it (too little left to judge by)."""
    good = ~np.isnan(load)
    seconds, load = seconds[good], load[good]
    if len(seconds) < 2:
        return None
    end = seconds[-1]
    grid = end - period * np.arange(count - 1, -1, -1)
    if seconds[0] > grid[0] + period / 2:
        return None
    inside = seconds[seconds >= grid[0] - period]
    gaps = np.diff(inside) if len(inside) > 1 else np.array([end - grid[0]])
    if gaps.max(initial=0.0) > period * max(3.0, count / 4):
        return None
    return np.interp(grid, seconds, load)
