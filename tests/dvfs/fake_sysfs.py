"""Fake cpufreq and devfreq trees, laid out as Linux lays out /sys (no real sysfs is ever written)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np

LEVELS_KHZ = (800_000, 1_200_000, 1_600_000, 2_000_000)


def write(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n")


def read(path: Path) -> str:
    return path.read_text().strip()


def cpufreq_tree(root: Path, *, cpus: int = 2, userspace: bool = True, shared: bool = True) -> Path:
    """``root``/cpuN/cpufreq, one policy for all CPUs (a symlinked directory, as on most SoCs) or
    one each; governor schedutil, min/max at the table's ends."""
    governors = "performance powersave schedutil" + (" userspace" if userspace else "")
    policies = (
        [root / "cpufreq" / "policy0"] if shared else [root / "cpufreq" / f"policy{i}" for i in range(cpus)]
    )
    for policy in policies:
        write(policy / "scaling_available_frequencies", " ".join(map(str, LEVELS_KHZ)))
        write(policy / "scaling_available_governors", governors)
        write(policy / "scaling_governor", "schedutil")
        write(policy / "scaling_min_freq", LEVELS_KHZ[0])
        write(policy / "scaling_max_freq", LEVELS_KHZ[-1])
        write(policy / "scaling_cur_freq", LEVELS_KHZ[1])
        write(policy / "cpuinfo_min_freq", LEVELS_KHZ[0])
        write(policy / "cpuinfo_max_freq", LEVELS_KHZ[-1])
        write(policy / "scaling_setspeed", "<unsupported>")
    for cpu in range(cpus):
        (root / f"cpu{cpu}").mkdir(parents=True, exist_ok=True)
        (root / f"cpu{cpu}" / "cpufreq").symlink_to(policies[0 if shared else cpu])
    return root


def devfreq_tree(root: Path, name: str = "13000000.gpu") -> Path:
    device = root / name
    write(device / "available_frequencies", "177000000 266000000 350000000 420000000 480000000 543000000")
    write(device / "available_governors", "simple_ondemand performance powersave")
    write(device / "governor", "simple_ondemand")
    write(device / "min_freq", 177_000_000)
    write(device / "max_freq", 543_000_000)
    write(device / "cur_freq", 350_000_000)
    return root


def snapshot(root: Path) -> dict[str, str]:
    """Every regular file's content under ``root`` (symlinks not followed twice)."""
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def write_trace(path: Path, loads: Sequence[float], *, period: float = 0.05, cores: int = 2) -> Path:
    """A monitor-format trace CSV whose every core carries ``loads``."""
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["time_s", "kind", *[f"cpu{i}_pct" for i in range(cores)], "frame", "latency_ms"])
        for i, load in enumerate(loads):
            writer.writerow([f"{(i + 1) * period:.4f}", "sample", *[f"{load:.1f}"] * cores, "", ""])
    return path


def cnn_like(samples: int, *, seed: int = 0) -> np.ndarray:
    """A periodic sample -> infer -> draw load: 0.6 s of inference near 95%, a 0.15 s trough."""
    rng = np.random.default_rng(seed)
    phase = np.arange(samples) % 15
    return np.where(phase < 12, 95.0, 30.0) + rng.normal(0, 2, samples)


def other_like(samples: int, *, seed: int = 1) -> np.ndarray:
    """Background load: mostly idle with random bursts."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.exponential(6.0, samples), 0, 100)
