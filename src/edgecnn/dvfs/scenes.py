"""What Algorithm 5.1 is configured with, chosen from recorded traces: the template (the most
typical 40-sample stretch of the CNN app's load: the window whose summed DTW distance to every
other window of that trace is least) and the threshold DTW_TH that separates the CNN scenario's
windows from every other scenario's, with the margin by which it does (seed 001's Fig. 5.7)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from edgecnn.dvfs.dtw import default_psi, dtw_distance
from edgecnn.dvfs.journal import write_atomically
from edgecnn.dvfs.traces import LoadTrace, regular
from edgecnn.errors import ConfigurationError, InputError

TEMPLATE_SAMPLES = 40  # seed 001: about 4 s of the app's load (at 100 ms there; 2 s at our 50 ms)


def windows(trace: LoadTrace, length: int, step: int, period: float) -> np.ndarray:
    """Every ``length``-sample window of the trace, ``step`` samples apart, each resampled onto
    the regular ``period`` grid that ends at its last sample (windows over long gaps are left out)."""
    if length < 2 or step < 1:
        raise InputError(f"a window needs at least 2 samples and a step of 1 (got {length}, {step})")
    found = []
    for end in range(length, len(trace) + 1, step):
        start = max(0, end - length - 4)
        grid = regular(trace.seconds[start:end], trace.load[start:end], period, length)
        if grid is not None:
            found.append(grid)
    if not found:
        raise InputError(f"{trace.source}: no complete {length}-sample window (the trace is too short)")
    return np.stack(found)


def extract_template(
    trace: LoadTrace, *, length: int = TEMPLATE_SAMPLES, period: float = 0.05, psi: int | None = None
) -> np.ndarray:
    """The medoid window of ``trace`` under DTW (windows a quarter-length apart)."""
    relax = default_psi(length) if psi is None else psi
    candidates = windows(trace, length, max(1, length // 4), period)
    count = len(candidates)
    totals = np.zeros(count)
    for i in range(count):
        for j in range(i + 1, count):
            d = dtw_distance(candidates[i], candidates[j], relax)
            totals[i] += d
            totals[j] += d
    return candidates[int(np.argmin(totals))]


def distances(
    trace: LoadTrace,
    template: np.ndarray,
    *,
    window: int,
    period: float,
    step: int = 1,
    psi: int | None = None,
) -> np.ndarray:
    """The DTW distance of each ``window``-sample window of ``trace`` to the template."""
    relax = default_psi(len(template)) if psi is None else psi
    return np.array([dtw_distance(w, template, relax) for w in windows(trace, window, step, period)])


@dataclass(frozen=True)
class Threshold:
    value: float  # DTW_TH: a window below it is the CNN scene
    margin: float  # nearest other window minus farthest CNN window (negative: they overlap)
    hysteresis: float  # a quarter of a positive margin: the CNN verdict holds up to value + this
    cnn_max: float
    other_min: float
    nearest_scene: str  # the other scenario that comes closest to the template
    cnn_missed: float  # share of CNN windows at or above the threshold
    others_caught: float  # mean over the other scenarios of the share of their windows below it


def choose_threshold(cnn: np.ndarray, others: Mapping[str, np.ndarray]) -> Threshold:
    """Midway between the farthest CNN window and the nearest other one when they separate;
    where they overlap, the value with the least error: the share of CNN windows at or above it
    plus the mean over the other scenarios of the share of theirs below it (each scenario counts
    the same, however many windows its recording gave)."""
    if len(cnn) == 0 or not others or any(len(d) == 0 for d in others.values()):
        raise InputError("choosing a threshold needs windows of the CNN scenario and of every other")
    pooled = np.concatenate(list(others.values()))
    nearest = min(others, key=lambda name: float(others[name].min()))
    cnn_max, other_min = float(cnn.max()), float(pooled.min())
    if cnn_max < other_min:
        value = (cnn_max + other_min) / 2
    else:
        candidates = np.unique(np.concatenate([cnn, pooled]))
        errors = [np.mean(cnn >= c) + caught(others, c) for c in candidates]
        value = float(candidates[int(np.argmin(errors))])
    return Threshold(
        value=value,
        margin=other_min - cnn_max,
        hysteresis=max(0.0, other_min - cnn_max) / 4,
        cnn_max=cnn_max,
        other_min=other_min,
        nearest_scene=nearest,
        cnn_missed=float(np.mean(cnn >= value)),
        others_caught=caught(others, value),
    )


def caught(others: Mapping[str, np.ndarray], value: float) -> float:
    """The mean over the scenarios of the share of their windows below ``value``."""
    return float(np.mean([np.mean(d < value) for d in others.values()]))


@dataclass(frozen=True)
class SceneConfig:
    """A template and its threshold, saved as JSON for `edgecnn govern --template`."""

    template: tuple[float, ...]
    threshold: float
    period: float
    window: int
    psi: int  # DTW start/end relaxation, in samples
    hysteresis: float  # see SceneClassifier
    source: str  # how it was made

    def save(self, path: Path) -> None:
        write_atomically(path, json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> SceneConfig:
        try:
            record = json.loads(path.read_text())
            config = cls(
                template=tuple(float(v) for v in record["template"]),
                threshold=float(record["threshold"]),
                period=float(record["period"]),
                window=int(record["window"]),
                psi=int(record["psi"]),
                hysteresis=float(record["hysteresis"]),
                source=str(record.get("source", "")),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path} is not a scene template file ({exc})") from None
        if (
            len(config.template) < 2
            or config.period <= 0
            or config.window < 2
            or config.psi < 0
            or config.hysteresis < 0
        ):
            raise InputError(
                f"{path}: the template needs 2+ samples, a positive period, a window of 2+, psi 0+"
            )
        return config


def bundled_template() -> Path:
    """The template and threshold chosen from this project's recorded scenarios
    (docs/governor.md says from which traces)."""
    path = Path(str(resources.files("edgecnn") / "dvfs" / "cnn_template.json"))
    if not path.is_file():
        raise ConfigurationError(f"the bundled scene template {path} is missing; pass --template")
    return path
