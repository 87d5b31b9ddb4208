"""The side-by-side timing loop: same model, same input, same threads for every engine; warm-up
excluded; timed runs interleaved round-robin so that drift (thermal, other load) hits all engines
alike; every engine's output compared with edgecnn's."""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.bench.peers import QUIET_POOLS, Engine, Runner
from edgecnn.bench.zoo import MODELS, model_path, zoo_entry
from edgecnn.errors import InputError

REFERENCE_ENGINE = "edgecnn"
BASELINE_ENGINE = "onnxruntime"
TOLERANCE = 1e-3  # max relative error above which an output is flagged as different


@dataclass
class Measurement:
    """One engine on one (model, batch): its timed runs, or why it has none."""

    model: str
    batch: int
    engine: str
    times_ms: list[float] = field(default_factory=list)
    max_rel_error: float | None = None  # vs the reference engine's output; None for the reference itself
    macs: int = 0  # multiply-accumulates of one forward pass at this batch
    error: str = ""  # why this engine could not run the model

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.times_ms)

    @property
    def min_ms(self) -> float:
        return min(self.times_ms)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def max_ms(self) -> float:
        return max(self.times_ms)

    @property
    def spread(self) -> float:
        """The noise of the timed rounds: interquartile range / median (0 below two rounds)."""
        if len(self.times_ms) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.times_ms, n=4, method="inclusive")
        return (q3 - q1) / self.median_ms if self.median_ms > 0 else 0.0

    @property
    def gflops(self) -> float:
        """Achieved GFLOP/s: 2 x MACs per median forward pass."""
        return 2.0 * self.macs / (self.median_ms * 1e6) if self.ok and self.macs else 0.0

    @property
    def flagged(self) -> bool:
        return self.max_rel_error is not None and not self.max_rel_error <= TOLERANCE

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        if self.ok:
            data.update(
                min_ms=self.min_ms,
                median_ms=self.median_ms,
                max_ms=self.max_ms,
                spread=self.spread,
                gflops=self.gflops,
            )
        return data


@dataclass
class BenchSettings:
    models: list[str]
    batches: list[int]
    threads: int
    rounds: int = 10
    warmup: int = 3
    seed: int = 0
    width: float = 1.0  # zoo scale (1.0 = the real architectures; tests use less)
    resolution: int | None = None
    gap_s: float = 0.02  # pause between timed runs, so one engine's spinning worker threads settle first


@dataclass
class Case:
    model: str
    batch: int
    skipped: str = ""  # why this (model, batch) was not run


ProgressCallback = Callable[[str], None]
"""Called once per finished run (warm-up or timed) with a short description of the case."""


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want|: robust where single elements of ``want`` are near zero."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.size != want.size:
        return float("inf")
    diff = np.abs(got.reshape(want.shape) - want)
    if not np.all(np.isfinite(diff)):
        return float("inf")
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    return float(diff.max() / scale) if scale > 0 else float(diff.max())


def forward_macs(path: Path, x: np.ndarray) -> int:
    """MACs of the imported (unoptimised) graph at this input shape, from edgecnn's static analysis."""
    from edgecnn.analysis import analyze
    from edgecnn.importers import load_graph
    from edgecnn.model import Model
    from edgecnn.runtime.options import RuntimeOptions

    model = Model(load_graph(path), RuntimeOptions.resolve(threads=1, optimize=False))
    return analyze(model.plan_for(x, optimized=False), model.graph.outputs).macs


def cases(settings: BenchSettings) -> list[Case]:
    result = []
    for name in settings.models:
        fixed = zoo_entry(name).fixed_batch
        for batch in settings.batches:
            skipped = f"the model file fixes batch {fixed}" if fixed is not None and batch != fixed else ""
            result.append(Case(name, batch, skipped))
    return result


def runs_per_case(settings: BenchSettings, engines: list[Engine]) -> int:
    return (max(1, settings.warmup) + settings.rounds) * len(engines)


def bench_case(
    case: Case,
    engines: list[Engine],
    settings: BenchSettings,
    cache_dir: Path,
    on_run: ProgressCallback | None = None,
) -> list[Measurement]:
    """Time every engine on one (model, batch) and check their outputs against the reference's."""
    entry = zoo_entry(case.model)
    path = model_path(case.model, cache_dir, settings.width, settings.resolution, settings.seed)
    side = entry.resolution if entry.build is None else (settings.resolution or entry.resolution)
    shape = (case.batch, entry.channels, side, side)
    x = np.random.default_rng(settings.seed).standard_normal(shape, dtype=np.float32)
    macs = forward_macs(path, x)
    label = f"{case.model} b{case.batch}"

    measurements = {e.name: Measurement(case.model, case.batch, e.name, macs=macs) for e in engines}
    runners: dict[str, Runner] = {}
    outputs: dict[str, np.ndarray] = {}
    warmup = max(1, settings.warmup)  # at least one untimed run: its output is the one checked
    for engine in engines:
        done = 0
        try:
            runners[engine.name] = engine.prepare(path, settings.threads, shape, cache_dir / "converted")
            for done in range(1, warmup + 1):
                out = runners[engine.name](x)
                if done == 1:
                    outputs[engine.name] = np.array(out, copy=True)
                if on_run:
                    on_run(label)
        except Exception as exc:  # a peer that cannot run a model is a result, not a crash
            measurements[engine.name].error = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            runners.pop(engine.name, None)
            outputs.pop(engine.name, None)
            for _ in range(warmup - max(0, done - 1)):
                if on_run:
                    on_run(label)

    _check_outputs(measurements, outputs)
    _interleaved(runners, measurements, x, settings, label, on_run)
    runners.clear()
    gc.collect()  # release the engines' weights before the next model loads
    return list(measurements.values())


def _check_outputs(measurements: dict[str, Measurement], outputs: dict[str, np.ndarray]) -> None:
    reference = REFERENCE_ENGINE if REFERENCE_ENGINE in outputs else next(iter(outputs), None)
    if reference is None:
        return
    for name, out in outputs.items():
        if name != reference:
            measurements[name].max_rel_error = relative_error(out, outputs[reference])


def _interleaved(
    runners: dict[str, Runner],
    measurements: dict[str, Measurement],
    x: np.ndarray,
    settings: BenchSettings,
    label: str,
    on_run: ProgressCallback | None,
) -> None:
    """R rounds; each round runs every engine once, starting from a different engine each time."""
    names = list(runners)
    missing = len(measurements) - len(names)
    for round_index in range(settings.rounds):
        shift = round_index % max(1, len(names))
        for name in names[shift:] + names[:shift]:
            if settings.gap_s:
                time.sleep(settings.gap_s)
            start = time.perf_counter()
            runners[name](x)
            measurements[name].times_ms.append((time.perf_counter() - start) * 1e3)
            if on_run:
                on_run(label)
        if on_run:
            for _ in range(missing):
                on_run(label)


def gemm_peak_gflops(threads: int, size: int = 1024, repeats: int = 5) -> float:
    """This machine's practical float32 roofline: the best np.matmul rate on ``threads`` BLAS threads."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    out = np.empty((size, size), dtype=np.float32)
    best = float("inf")
    with threadpool_limits(limits=threads, user_api="blas"):
        np.matmul(a, b, out=out)  # warm-up: thread pool start, page faults
        for _ in range(repeats):
            start = time.perf_counter()
            np.matmul(a, b, out=out)
            best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best / 1e9


@dataclass
class BenchResult:
    settings: BenchSettings
    measurements: list[Measurement]
    skipped_engines: dict[str, str]  # engine -> why it did not run at all
    skipped_cases: list[Case]
    gemm_peak_gflops: float
    machine: dict[str, object]
    commands: list[str] = field(default_factory=list)  # several when results were merged (--update)
    date: str = ""
    comparison: dict[str, Any] = field(default_factory=dict)  # an earlier run's ratios (--compare)

    def baseline(self, model: str, batch: int) -> Measurement | None:
        for m in self.measurements:
            if m.model == model and m.batch == batch and m.engine == BASELINE_ENGINE and m.ok:
                return m
        return None

    def ratio(self, m: Measurement, statistic: str = "median") -> float | None:
        """Latency (median, or min) relative to onnxruntime's on the same case (< 1: faster)."""
        base = self.baseline(m.model, m.batch)
        if base is None or not m.ok:
            return None
        return m.min_ms / base.min_ms if statistic == "min" else m.median_ms / base.median_ms

    def to_dict(self) -> dict[str, object]:
        rows = []
        for m in self.measurements:
            row = m.to_dict()
            row["ratio_to_onnxruntime"] = self.ratio(m)
            row["fraction_of_gemm_peak"] = m.gflops / self.gemm_peak_gflops if self.gemm_peak_gflops else None
            rows.append(row)
        return {
            "commands": self.commands,
            "date": self.date,
            "settings": asdict(self.settings),
            "machine": self.machine,
            "gemm_peak_gflops": self.gemm_peak_gflops,
            "skipped_engines": self.skipped_engines,
            "skipped_cases": [asdict(c) for c in self.skipped_cases],
            "results": rows,
            **({"comparison": self.comparison} if self.comparison else {}),
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> BenchResult:
        """Read back what to_dict wrote (the JSON sidecar of docs/benchmarks.md)."""
        fields = {f for f in Measurement.__dataclass_fields__}
        return BenchResult(
            settings=BenchSettings(**data["settings"]),
            measurements=[
                Measurement(**{k: v for k, v in row.items() if k in fields}) for row in data["results"]
            ],
            skipped_engines=dict(data["skipped_engines"]),
            skipped_cases=[Case(**c) for c in data["skipped_cases"]],
            gemm_peak_gflops=float(data["gemm_peak_gflops"]),
            machine=dict(data["machine"]),
            commands=list(data["commands"]),
            date=str(data["date"]),
            comparison=dict(data.get("comparison", {})),
        )

    def merged_into(self, previous: BenchResult) -> BenchResult:
        """This run's rows plus ``previous``'s rows for the (model, batch) cases this run did not cover."""
        if previous.machine.get("cpu") != self.machine.get("cpu"):
            raise InputError(
                f"cannot merge results from different CPUs ({previous.machine.get('cpu')} vs {self.machine.get('cpu')})"
            )
        covered = {(c.model, c.batch) for c in cases(self.settings)}
        kept = [m for m in previous.measurements if (m.model, m.batch) not in covered]
        order = {name: i for i, name in enumerate(MODELS)}
        engines = list(dict.fromkeys([m.engine for m in self.measurements + kept]))
        rows = sorted(
            kept + self.measurements, key=lambda m: (m.batch, order.get(m.model, 99), engines.index(m.engine))
        )
        skipped = [
            c for c in previous.skipped_cases if (c.model, c.batch) not in covered
        ] + self.skipped_cases
        return BenchResult(
            settings=self.settings,
            measurements=rows,
            skipped_engines={
                **{k: v for k, v in previous.skipped_engines.items() if k not in engines},
                **self.skipped_engines,
            },
            skipped_cases=skipped,
            gemm_peak_gflops=max(
                self.gemm_peak_gflops, previous.gemm_peak_gflops
            ),  # the best seen is the roofline
            machine=self.machine,
            commands=list(dict.fromkeys(previous.commands + self.commands)),
            date=self.date,
            comparison=self.comparison,
        )


def run_benchmark(
    settings: BenchSettings,
    engines: list[Engine],
    skipped_engines: dict[str, str],
    cache_dir: Path,
    on_run: ProgressCallback | None = None,
) -> BenchResult:
    """Every (model, batch) case on every engine, then the GEMM roofline of this machine."""
    from edgecnn.bench.machine import load_average, machine_info

    load_before = load_average()
    peak_before = gemm_peak_gflops(settings.threads)  # measured again at the end: other load makes one low
    measurements: list[Measurement] = []
    all_cases = cases(settings)
    for case in all_cases:
        if not case.skipped:
            measurements += bench_case(case, engines, settings, cache_dir, on_run)
    machine = machine_info({e.name: e.version() for e in engines})
    machine["load_average_before"] = load_before
    machine["environment"] = {key: os.environ.get(key, "") for key in QUIET_POOLS}
    return BenchResult(
        settings=settings,
        measurements=measurements,
        skipped_engines=dict(skipped_engines),
        skipped_cases=[c for c in all_cases if c.skipped],
        gemm_peak_gflops=max(peak_before, gemm_peak_gflops(settings.threads)),
        machine=machine,
        date=time.strftime("%Y-%m-%d %H:%M %Z"),
    )
