"""Frequency control on fake cpufreq/devfreq trees: pinning, restoring byte for byte, read-only
and disappearing trees, the journal a crashed governor leaves and its recovery."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dvfs.fake_sysfs import LEVELS_KHZ, cpufreq_tree, devfreq_tree, read, snapshot
from edgecnn.dvfs.control import FrequencyControl
from edgecnn.dvfs.domains import cpufreq_policies, devfreq_devices, select_domains
from edgecnn.dvfs.journal import recover
from edgecnn.errors import DeviceError


def control(root: Path, journal: Path, gpu: Path | None = None) -> FrequencyControl:
    """Every policy under ``root``, and the fake GPU under ``gpu``."""
    names = [] if gpu is None else ["13000000.gpu"]
    domains = select_domains(None, names, cpufreq_root=root, devfreq_root=gpu or root)
    return FrequencyControl(domains, journal=journal, log=lambda line: None)


def without_setspeed(state: dict[str, str]) -> dict[str, str]:
    """scaling_setspeed means nothing outside the userspace governor (sysfs then reads <unsupported>)."""
    return {k: v for k, v in state.items() if not k.endswith("scaling_setspeed")}


def test_policies_are_found_once_per_shared_directory(tmp_path: Path) -> None:
    shared = cpufreq_policies(cpufreq_tree(tmp_path / "a", cpus=4))
    assert [p.cpus for p in shared] == [(0, 1, 2, 3)]
    assert shared[0].frequencies() == list(LEVELS_KHZ)
    each = cpufreq_policies(cpufreq_tree(tmp_path / "b", cpus=2, shared=False))
    assert [p.cpus for p in each] == [(0,), (1,)]
    assert [p.cpus for p in select_domains([1], [], cpufreq_root=tmp_path / "b")] == [(1,)]
    with pytest.raises(DeviceError, match="CPU 5 has no cpufreq policy"):
        select_domains([5], [], cpufreq_root=tmp_path / "b")
    with pytest.raises(DeviceError, match="no cpufreq policy"):
        select_domains(None, [], cpufreq_root=tmp_path / "empty")


def test_userspace_pin_and_restore(tmp_path: Path) -> None:
    root = cpufreq_tree(tmp_path / "sys")
    before = snapshot(root)
    journal = tmp_path / "journal.json"
    with control(root, journal) as ctl:
        ctl.pin_max()
        policy = root / "cpufreq" / "policy0"
        assert read(policy / "scaling_governor") == "userspace"
        assert read(policy / "scaling_setspeed") == str(LEVELS_KHZ[-1])
        saved = json.loads(journal.read_text())
        assert saved["changes"] == [{"path": str(policy / "scaling_governor"), "original": "schedutil"}]
        ctl.release()
        assert read(policy / "scaling_governor") == "schedutil"
        assert not journal.exists()
        ctl.pin_max()
    assert without_setspeed(snapshot(root)) == without_setspeed(before)
    assert not journal.exists()


def test_min_max_pin_without_userspace_restores_every_byte(tmp_path: Path) -> None:
    root = cpufreq_tree(tmp_path / "sys", userspace=False, shared=False)
    gpu = devfreq_tree(tmp_path / "devfreq")
    before = snapshot(tmp_path)
    with control(root, tmp_path / "j.json", gpu=gpu) as ctl:
        policy = ctl.domains[0]
        ctl.pin(policy, LEVELS_KHZ[1])
        state = policy.state()
        assert (state.min_khz, state.max_khz, state.governor) == (LEVELS_KHZ[1], LEVELS_KHZ[1], "schedutil")
        ctl.pin_max()
        assert policy.state().min_khz == policy.state().max_khz == LEVELS_KHZ[-1]
        assert (
            read(gpu / "13000000.gpu" / "min_freq") == read(gpu / "13000000.gpu" / "max_freq") == "543000000"
        )
        with pytest.raises(DeviceError, match="no 1000000 kHz level"):
            ctl.pin(policy, 1_000_000)
    assert snapshot(tmp_path) == before


def test_read_only_tree_is_a_clear_device_error_and_changes_nothing(tmp_path: Path) -> None:
    root = cpufreq_tree(tmp_path / "sys")
    for path in (root / "cpufreq" / "policy0").iterdir():
        path.chmod(0o444)
    before = snapshot(root)
    journal = tmp_path / "j.json"
    with control(root, journal) as ctl, pytest.raises(DeviceError, match="scaling_governor is read-only"):
        ctl.pin_max()
    assert snapshot(root) == before
    assert (
        not journal.exists()
    )  # the journal entry was made, then restored (rewriting the same value failed?)


def test_a_tree_that_disappears_mid_run(tmp_path: Path) -> None:
    root = cpufreq_tree(tmp_path / "sys", userspace=False)
    journal = tmp_path / "j.json"
    lines: list[str] = []
    domains = select_domains(None, [], cpufreq_root=root)
    with FrequencyControl(domains, journal=journal, log=lines.append) as ctl:
        ctl.pin_max()
        shutil.rmtree(root / "cpufreq")  # the CPU went offline, its policy with it
        with pytest.raises(DeviceError, match="disappeared"):
            ctl.pin(domains[0], LEVELS_KHZ[0])
        ctl.release()
        assert any("disappeared; nothing to restore" in line for line in lines)
    assert not journal.exists()


def test_restore_that_fails_keeps_the_journal_for_the_next_start(tmp_path: Path) -> None:
    root = cpufreq_tree(tmp_path / "sys", userspace=False)
    journal = tmp_path / "j.json"
    policy = root / "cpufreq" / "policy0"
    ctl = control(root, journal)
    ctl.pin_max()
    (policy / "scaling_min_freq").chmod(0o444)
    with pytest.raises(DeviceError, match="kept in"):
        ctl.release()
    saved = json.loads(journal.read_text())
    assert [c["path"] for c in saved["changes"]] == [str(policy / "scaling_min_freq")]
    (policy / "scaling_min_freq").chmod(0o644)
    assert recover(journal) is not None
    assert read(policy / "scaling_min_freq") == str(LEVELS_KHZ[0])
    assert not journal.exists()


def test_journal_of_a_dead_governor_is_replayed_and_a_live_one_refused(tmp_path: Path) -> None:
    root = cpufreq_tree(tmp_path / "sys")
    governor = root / "cpufreq" / "policy0" / "scaling_governor"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    journal = tmp_path / "j.json"
    record = {
        "version": 1,
        "pid": int(dead.stdout),
        "changes": [{"path": str(governor), "original": "schedutil"}],
    }
    governor.write_text("userspace\n")
    journal.write_text(json.dumps(record))
    lines: list[str] = []
    with FrequencyControl(select_domains(None, [], cpufreq_root=root), journal=journal, log=lines.append):
        assert read(governor) == "schedutil"
    assert "left by governor pid" in lines[0]
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        journal.write_text(json.dumps({**record, "pid": alive.pid}))
        with pytest.raises(DeviceError, match=f"another governor \\(pid {alive.pid}\\)"):
            recover(journal)
    finally:
        alive.kill()
        alive.wait()


def test_devfreq_devices_and_unknown_names(tmp_path: Path) -> None:
    gpu = devfreq_tree(tmp_path / "devfreq")
    (device,) = devfreq_devices(gpu)
    assert device.frequencies()[0] == 177_000 and device.state().governor == "simple_ondemand"
    with pytest.raises(DeviceError, match="no devfreq device 'npu'"):
        select_domains(None, ["npu"], cpufreq_root=tmp_path / "none", devfreq_root=gpu)
