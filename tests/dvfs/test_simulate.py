"""The processor model and the replay: its arithmetic on simple loads, the default rule's lag and
ping-pong, Algorithm 5.1 pinning the top level, and the seed's finding on a CNN-like load."""

from __future__ import annotations

import numpy as np
import pytest

from dvfs.fake_sysfs import cnn_like, other_like
from edgecnn.dvfs.classifier import SceneClassifier
from edgecnn.dvfs.scenes import extract_template
from edgecnn.dvfs.simulate import (
    EXYNOS5422_A15,
    SEED_CPU_BUSY_W,
    SEED_CPU_LIGHT_W,
    Fixed,
    Level,
    ProcessorModel,
    SceneAware,
    Schedutil,
    replay,
)
from edgecnn.dvfs.traces import LoadTrace
from edgecnn.errors import ConfigurationError

PERIOD = 0.05
MODEL = EXYNOS5422_A15


def test_power_model_reproduces_the_seed_figures_it_is_built_from() -> None:
    assert MODEL.power(MODEL.top, MODEL.cores) == pytest.approx(SEED_CPU_BUSY_W)
    assert MODEL.power(MODEL.top, 0) == pytest.approx(SEED_CPU_LIGHT_W)
    assert MODEL.power(0, 4) < MODEL.power(5, 4) < MODEL.power(MODEL.top, 4)
    assert MODEL.levels[0] == Level(700, 0.9125) and MODEL.nearest(1420) == 7
    with pytest.raises(ConfigurationError):
        ProcessorModel("bad", (Level(2, 1.0), Level(1, 1.0)), 1, 1.0, 0.0)


def test_replay_stretches_busy_time_and_not_idle_time() -> None:
    full, idle = np.full(100, 100.0), np.zeros(100)
    top = replay(full, PERIOD, MODEL, Fixed(MODEL.top))
    assert top.seconds == pytest.approx(5.0) and top.joules == pytest.approx(5.0 * SEED_CPU_BUSY_W)
    slow = replay(full, PERIOD, MODEL, Fixed(0))
    assert slow.seconds == pytest.approx(5.0 * 1800 / 700)
    assert slow.utilisation.max() == pytest.approx(100.0)
    assert replay(idle, PERIOD, MODEL, Fixed(0)).seconds == pytest.approx(5.0)
    half = replay(np.full(100, 50.0), PERIOD, MODEL, Fixed(0))
    assert half.seconds == pytest.approx(5.0 * (0.5 * 1800 / 700 + 0.5))


def test_default_rule_lags_a_step_and_ping_pongs_on_a_periodic_load() -> None:
    step = np.concatenate([np.zeros(20), np.full(20, 100.0)])
    run = replay(step, PERIOD, MODEL, Schedutil(), start_level=0)
    ramp = run.levels[20:]
    assert ramp[0] == 0 and (np.diff(ramp) >= 0).all()  # it sees the load one period late,
    reached = int(np.argmax(ramp == MODEL.top))
    assert 3 <= reached <= 8  # and climbs by x1.25 per period: busy at 700 MHz looks like 39% load
    periodic = replay(cnn_like(400), PERIOD, MODEL, Schedutil())
    assert periodic.switches_per_second() > 1.0
    assert replay(cnn_like(400), PERIOD, MODEL, Fixed(MODEL.top)).switches_per_second() == 0.0


def test_top_level_beats_the_default_rule_on_a_cnn_load_and_algorithm_5_1_pins_it() -> None:
    load = cnn_like(600, seed=3)
    default = replay(load, PERIOD, MODEL, Schedutil(), inferences=40)
    top = replay(load, PERIOD, MODEL, Fixed(MODEL.top), inferences=40)
    assert top.fps > default.fps and top.edp < default.edp * 1.05
    template = extract_template(
        LoadTrace(PERIOD * np.arange(1, 201), cnn_like(200, seed=4), "t"), period=PERIOD
    )
    classifier = SceneClassifier(template, 100.0, window=30, period=PERIOD, psi=10)
    scene = np.concatenate([other_like(200), load])
    aware = replay(scene, PERIOD, MODEL, SceneAware(classifier))
    pinned = np.flatnonzero(aware.levels == MODEL.top)
    assert aware.levels[1:150].max() < MODEL.top and pinned[pinned > 0].min() < 200 + 40
    assert (aware.levels[260:] == MODEL.top).all()
