"""DTW against a plain dynamic program, traces, template and threshold selection, and the scene
classifier under jitter and missing samples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dvfs.fake_sysfs import cnn_like, other_like, write_trace
from edgecnn.dvfs.classifier import SceneClassifier
from edgecnn.dvfs.dtw import dtw_distance
from edgecnn.dvfs.scenes import SceneConfig, bundled_template, choose_threshold, distances, extract_template
from edgecnn.dvfs.traces import LoadTrace, read_trace, regular
from edgecnn.errors import ConfigurationError, InputError

PERIOD = 0.05
M = 30


def reference_dtw(a: np.ndarray, b: np.ndarray) -> float:
    """Eq. 5.2 with squared differences, the square root of the cheapest path's sum."""
    cost = np.full((len(a) + 1, len(b) + 1), np.inf)
    cost[0, 0] = 0.0
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost[i, j] = (a[i - 1] - b[j - 1]) ** 2 + min(cost[i - 1, j], cost[i, j - 1], cost[i - 1, j - 1])
    return float(np.sqrt(cost[-1, -1]))


def trace(load: np.ndarray, seconds: np.ndarray | None = None) -> LoadTrace:
    times = PERIOD * np.arange(1, len(load) + 1) if seconds is None else seconds
    return LoadTrace(times, load, "synthetic")


def test_dtw_matches_the_dynamic_program() -> None:
    rng = np.random.default_rng(3)
    for n, m in ((40, 40), (40, 25), (7, 31)):
        a, b = rng.uniform(0, 100, n), rng.uniform(0, 100, m)
        assert dtw_distance(a, b) == pytest.approx(reference_dtw(a, b), rel=1e-9)
        assert dtw_distance(a, b) == pytest.approx(dtw_distance(b, a))
    shifted = np.roll(cnn_like(40), 3)
    assert dtw_distance(cnn_like(40), cnn_like(40)) == 0.0
    assert dtw_distance(cnn_like(40), shifted) < np.sqrt(np.sum((cnn_like(40) - shifted) ** 2))


def test_regular_grid_fills_jitter_and_gaps_but_not_long_holes() -> None:
    seconds = np.array([0.05, 0.11, 0.14, 0.25, 0.30])  # 0.20 missing, others early or late
    load = np.array([10.0, 20.0, 30.0, 50.0, 60.0])
    grid = regular(seconds, load, PERIOD, 5)
    assert grid is not None and grid[-1] == 60.0 and grid[3] == pytest.approx(50.0)
    assert regular(seconds, load, PERIOD, 10) is None  # the samples do not reach back far enough
    holed = np.concatenate([PERIOD * np.arange(1, 30), [3.0]])
    assert regular(holed, np.ones(30), PERIOD, 25) is None


def test_read_trace_system_and_scene_columns(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.csv", [10, 20, 30])
    text = path.read_text().splitlines()
    text.insert(2, "0.0700,inference_end,,,3,12.5")  # an event row is not a sample
    text[3] = text[3].replace("20.0,20.0", "20.0,")  # a missing cell is a gap
    path.write_text("\n".join(text) + "\n")
    loaded = read_trace(path)
    assert loaded.load[0] == 10.0 and np.isnan(loaded.load[1]) and len(loaded) == 3
    assert read_trace(path, cpus=[0]).load[1] == 20.0
    with pytest.raises(InputError, match="no scene_pct"):
        read_trace(path, source="scene")
    with pytest.raises(InputError, match="CPU"):
        read_trace(path, cpus=[7])
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="not a load trace"):
        read_trace(tmp_path / "bad.csv")
    with pytest.raises(InputError, match="cannot read"):
        read_trace(tmp_path / "absent.csv")


def synthetic_config() -> tuple[np.ndarray, float, float]:
    template = extract_template(trace(cnn_like(200, seed=5)), period=PERIOD)
    cnn = distances(trace(cnn_like(300, seed=6)), template, window=M, period=PERIOD, step=3)
    others = {
        "idle": distances(trace(other_like(300, seed=7)), template, window=M, period=PERIOD, step=3),
        "busy": distances(
            trace(np.clip(95 + other_like(300, seed=8) / 3, 0, 100)),
            template,
            window=M,
            period=PERIOD,
            step=3,
        ),
    }
    threshold = choose_threshold(cnn, others)
    return template, threshold.value, threshold.margin


def test_template_and_threshold_separate_the_scenes() -> None:
    template, _, margin = synthetic_config()
    assert len(template) == 40 and margin > 0
    overlap = choose_threshold(np.array([1.0, 5.0, 9.0]), {"x": np.array([4.0, 10.0, 12.0])})
    assert overlap.margin == -5.0 and overlap.value == 10.0
    assert overlap.cnn_missed == 0.0 and overlap.others_caught == pytest.approx(1 / 3)
    weighted = choose_threshold(
        np.array([1.0, 2.0, 3.0, 10.0]), {"far": np.full(100, 50.0), "near": np.array([2.5, 9.0])}
    )
    assert weighted.value == 2.5  # pooled, the near scenario's two windows would not count against 50
    with pytest.raises(InputError):
        choose_threshold(np.array([]), {"x": np.array([1.0])})


def test_classifier_follows_scene_changes_within_m_samples_despite_jitter_and_gaps() -> None:
    template, threshold, _ = synthetic_config()
    load = np.concatenate([other_like(200, seed=11), cnn_like(200, seed=12), other_like(200, seed=13)])
    rng = np.random.default_rng(14)
    seconds = PERIOD * np.arange(1, 601) + rng.uniform(-0.2, 0.2, 600) * PERIOD
    keep = rng.uniform(size=600) > 0.1  # one sample in ten never arrives
    classifier = SceneClassifier(template, threshold, window=M, period=PERIOD)
    verdicts = {int(i): classifier.push(seconds[i], load[i]).cnn for i in np.flatnonzero(keep)}
    assert not any(v for i, v in verdicts.items() if i < 200)
    assert all(v for i, v in verdicts.items() if 200 + M <= i < 400)
    assert not any(v for i, v in verdicts.items() if i >= 400 + M)


def test_classifier_and_config_checks(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="more than 20"):
        SceneClassifier(np.ones(40), 10.0, window=20, period=PERIOD)
    config = SceneConfig(tuple(cnn_like(40).tolist()), 123.0, PERIOD, M, 20, 5.0, "synthetic")
    config.save(tmp_path / "c.json")
    assert SceneConfig.load(tmp_path / "c.json") == config
    (tmp_path / "bad.json").write_text('{"template": [1]}')
    with pytest.raises(InputError, match="not a scene template"):
        SceneConfig.load(tmp_path / "bad.json")


def test_the_bundled_template_on_the_recorded_scenarios() -> None:
    """The shipped template and DTW_TH against the traces they were chosen from (docs/governor.md):
    the CNN app's windows fall below the threshold, idle and video far above it."""
    config = SceneConfig.load(bundled_template())
    data = Path(__file__).parent / "data"

    def below(scene: str) -> float:
        trace = read_trace(data / f"{scene}.csv", source="demand")
        found = distances(
            trace,
            np.array(config.template),
            window=config.window,
            period=config.period,
            step=4,
            psi=config.psi,
        )
        return float(np.mean(found < config.threshold))

    assert below("cnn") > 0.9
    assert below("idle") == 0.0 and below("video") == 0.0
    assert below("compile") < 0.2
