"""Algorithm 5.1 on a fake cpufreq tree: the governor pins the top frequency within M samples of a
CNN load starting and restores the default governor within M samples of it stopping; the settings
come back on SIGINT and SIGTERM, and after SIGKILL on the next start (subprocesses)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dvfs.fake_sysfs import LEVELS_KHZ, cnn_like, cpufreq_tree, other_like, read, snapshot, write_trace
from edgecnn.cli.app import EXIT_ERROR, EXIT_USAGE, app
from edgecnn.dvfs.classifier import SceneClassifier
from edgecnn.dvfs.control import FrequencyControl
from edgecnn.dvfs.domains import select_domains
from edgecnn.dvfs.governor import Governor, highest_mhz, live_samples
from edgecnn.dvfs.scenes import SceneConfig, choose_threshold, distances, extract_template
from edgecnn.dvfs.traces import LoadTrace

PERIOD = 0.05
M = 30
IDLE, CNN = 120, 160  # samples before the CNN load, and of it


def synthetic(load: np.ndarray) -> LoadTrace:
    return LoadTrace(PERIOD * np.arange(1, len(load) + 1), load, "synthetic")


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A template and threshold chosen from synthetic CNN and background traces."""
    template = extract_template(synthetic(cnn_like(160, seed=21)), period=PERIOD)
    cnn = distances(synthetic(cnn_like(200, seed=22)), template, window=M, period=PERIOD, step=2)
    other = distances(synthetic(other_like(200, seed=23)), template, window=M, period=PERIOD, step=2)
    threshold = choose_threshold(cnn, {"background": other})
    path = tmp_path_factory.mktemp("config") / "template.json"
    SceneConfig(
        tuple(template.tolist()),
        threshold.value,
        PERIOD,
        M,
        10,
        threshold.hysteresis,
        "synthetic test traces",
    ).save(path)
    return path


def scenario() -> np.ndarray:
    return np.concatenate([other_like(IDLE, seed=31), cnn_like(CNN, seed=32), other_like(IDLE, seed=33)])


def test_pins_within_m_samples_of_the_cnn_load_and_restores_within_m_of_its_end(
    tmp_path: Path, config_file: Path
) -> None:
    root = cpufreq_tree(tmp_path / "sys", userspace=False)
    before = snapshot(root)
    policy = root / "cpufreq" / "policy0"
    config = SceneConfig.load(config_file)
    classifier = SceneClassifier(
        config.template,
        config.threshold,
        window=M,
        period=PERIOD,
        psi=config.psi,
        hysteresis=config.hysteresis,
    )
    pinned = []
    with FrequencyControl(
        select_domains(None, [], cpufreq_root=root), journal=tmp_path / "j.json", log=print
    ) as ctl:
        governor = Governor(classifier, ctl, log=print)
        for i, load in enumerate(scenario()):
            governor.step((i + 1) * PERIOD, float(load))
            pinned.append(read(policy / "scaling_min_freq") == str(LEVELS_KHZ[-1]))
    assert snapshot(root) == before
    first_pin = pinned.index(True)
    assert IDLE <= first_pin < IDLE + M
    last_pin = len(pinned) - 1 - pinned[::-1].index(True)
    assert IDLE + CNN - 1 <= last_pin < IDLE + CNN + M
    assert all(pinned[first_pin : last_pin + 1])  # no ping-pong in between


def test_govern_command_replays_a_trace_on_a_fake_tree(tmp_path: Path, config_file: Path) -> None:
    root = cpufreq_tree(tmp_path / "sys")
    before = snapshot(root)
    trace = write_trace(tmp_path / "trace.csv", scenario())
    decisions = tmp_path / "decisions.jsonl"
    args = ["govern", "--template", str(config_file), "--replay", str(trace), "--speed", "0"]
    args += [
        "--cpufreq-root",
        str(root),
        "--journal",
        str(tmp_path / "j.json"),
        "--decisions",
        str(decisions),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "pin to" in line or "release to" in line]
    assert len(lines) == 2 and "pin to the highest frequency" in lines[0]
    pinned_at = float(lines[0].split()[0])
    assert IDLE * PERIOD <= pinned_at < (IDLE + M) * PERIOD
    released_at = float(lines[1].split()[0])
    assert (IDLE + CNN) * PERIOD <= released_at < (IDLE + CNN + M) * PERIOD
    assert "1 pin(s), 1 release(s)" in result.output and "of one core" in result.output
    records = [json.loads(line) for line in decisions.read_text().splitlines()]
    assert len(records) == 2 * IDLE + CNN and {"t", "load", "dtw", "cnn"} <= set(records[0])
    assert without_setspeed(snapshot(root)) == without_setspeed(before)


def without_setspeed(state: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in state.items() if not k.endswith("scaling_setspeed")}


def test_dry_run_writes_nothing_and_errors_are_one_line(tmp_path: Path, config_file: Path) -> None:
    trace = write_trace(tmp_path / "trace.csv", scenario())
    args = ["govern", "--template", str(config_file), "--replay", str(trace), "--speed", "0", "--dry-run"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and "(dry run)" in result.output
    missing = CliRunner().invoke(app, [*args[:-1], "--cpufreq-root", str(tmp_path / "none")])
    assert missing.exit_code == EXIT_ERROR and "no cpufreq policy" in missing.output
    bad = CliRunner().invoke(app, [*args, "--cpus", "x"])
    assert bad.exit_code == EXIT_USAGE


def start_governor(tmp_path: Path, config_file: Path, root: Path) -> subprocess.Popen[str]:
    """A governor replaying a trace that is a CNN load all along, in real time."""
    trace = write_trace(tmp_path / "cnn.csv", cnn_like(1200, seed=41))
    command = [
        sys.executable,
        "-m",
        "edgecnn",
        "govern",
        "--template",
        str(config_file),
        "--replay",
        str(trace),
    ]
    command += ["--cpufreq-root", str(root), "--journal", str(tmp_path / "j.json")]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_pinned(policy: Path, child: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while read(policy / "scaling_governor") != "userspace":
        assert child.poll() is None, child.communicate()[0]
        assert time.monotonic() < deadline, "the governor never pinned"
        time.sleep(0.1)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signals_restore_the_default_governor(
    tmp_path: Path, config_file: Path, signum: int, status: int
) -> None:
    root = cpufreq_tree(tmp_path / "sys")
    policy = root / "cpufreq" / "policy0"
    child = start_governor(tmp_path, config_file, root)
    wait_pinned(policy, child)
    os.kill(child.pid, signum)
    output = child.communicate(timeout=30)[0]
    assert child.returncode == status, output
    assert read(policy / "scaling_governor") == "schedutil"
    assert not (tmp_path / "j.json").exists()


def test_after_sigkill_the_next_start_restores(tmp_path: Path, config_file: Path) -> None:
    root = cpufreq_tree(tmp_path / "sys")
    policy = root / "cpufreq" / "policy0"
    child = start_governor(tmp_path, config_file, root)
    wait_pinned(policy, child)
    child.kill()
    child.communicate(timeout=30)
    assert read(policy / "scaling_governor") == "userspace"  # nothing ran to restore it
    assert json.loads((tmp_path / "j.json").read_text())["pid"] == child.pid
    idle = write_trace(tmp_path / "idle.csv", other_like(40, seed=42))
    args = ["govern", "--template", str(config_file), "--replay", str(idle), "--speed", "0"]
    args += ["--cpufreq-root", str(root), "--journal", str(tmp_path / "j.json")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"left by governor pid {child.pid}" in result.output
    assert read(policy / "scaling_governor") == "schedutil"
    assert not (tmp_path / "j.json").exists()


def test_live_samples_are_frequency_invariant_where_cpufreq_shows_frequencies(tmp_path: Path) -> None:
    cores = os.cpu_count() or 1
    root = cpufreq_tree(tmp_path / "sys", cpus=cores)  # every core at 1200 of 2000 MHz
    ticks = iter(range(10**6))
    samples = live_samples(
        0.05, None, cpufreq_root=root, clock=lambda: next(ticks) * 0.05, sleep=lambda s: None
    )
    scaled = [load for _, load in itertools.islice(samples, 5)]
    assert all(0.0 <= load <= 100.0 * LEVELS_KHZ[1] / LEVELS_KHZ[-1] + 1e-9 for load in scaled)
    assert highest_mhz(root, [0]) == [LEVELS_KHZ[-1] / 1000]
    assert highest_mhz(tmp_path / "none", [0]) is None
