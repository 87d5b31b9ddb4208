"""What the scene governor costs: the DTW of two 40-sample sequences (dtaidistance's C kernel, its
pure-Python path, and a numba kernel written here as the alternative to shipping our own), the
classifier's cost per sample, and the governor's own CPU use while it runs live (seed 001's
Table 5.2 asks that it cost no noticeable power).

    .venv/bin/python lab/governor_dtw_cost.py [--seconds 20]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np

from common import REPO, machine_line
from edgecnn.dvfs.classifier import SceneClassifier
from edgecnn.dvfs.dtw import dtw_distance
from edgecnn.dvfs.scenes import SceneConfig, bundled_template
from edgecnn.dvfs.simulate import EXYNOS5422_A15
from edgecnn.dvfs.traces import read_trace


@numba.njit(cache=False)  # compiled afresh: its start-up cost is part of the comparison
def numba_dtw(a: np.ndarray, b: np.ndarray) -> float:
    """The candidate kernel of ours: eq. 5.2 with squared differences, two rows of the table."""
    n, m = len(a), len(b)
    previous = np.full(m + 1, np.inf)
    previous[0] = 0.0
    current = np.empty(m + 1)
    for i in range(1, n + 1):
        current[0] = np.inf
        for j in range(1, m + 1):
            d = (a[i - 1] - b[j - 1]) ** 2
            current[j] = d + min(previous[j], current[j - 1], previous[j - 1])
        previous, current = current, previous
    return float(np.sqrt(previous[m]))


def microseconds(function: Callable[[], object], repeat: int, rounds: int = 7) -> float:
    """The median over ``rounds`` of the mean time of ``repeat`` calls, in µs."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeat):
            function()
        times.append((time.perf_counter() - start) / repeat * 1e6)
    return statistics.median(times)


def dtw_table() -> None:
    from dtaidistance import dtw

    rng = np.random.default_rng(0)
    a, b = rng.uniform(0, 100, 40), rng.uniform(0, 100, 40)
    reference = dtw.distance(a, b, use_c=False)
    start = time.perf_counter()
    numba_dtw(a, b)
    compile_ms = (time.perf_counter() - start) * 1e3
    rows = [
        ("dtaidistance distance_fast (C), as edgecnn.dvfs.dtw calls it", lambda: dtw_distance(a, b), 2000),
        ("dtaidistance distance_fast (C), psi 10", lambda: dtw_distance(a, b, 10), 2000),
        ("dtaidistance distance_fast (C), called directly", lambda: dtw.distance_fast(a, b), 2000),
        ("dtaidistance distance, pure Python", lambda: dtw.distance(a, b, use_c=False), 50),
        ("numba kernel (this script)", lambda: numba_dtw(a, b), 2000),
    ]
    print("| DTW of two 40-sample sequences | µs per call | distance |")
    print("|---|---|---|")
    for label, function, repeat in rows:
        value = float(function())  # type: ignore[arg-type]
        print(f"| {label} | {microseconds(function, repeat):.1f} | {value:.6f} |")
    print(
        f"(the pure-Python reference distance: {reference:.6f}; the numba kernel's first call, its compilation: {compile_ms:.0f} ms)"
    )


def classifier_cost() -> None:
    config = SceneConfig.load(bundled_template())
    trace = read_trace(REPO / "tests" / "dvfs" / "data" / "cnn.csv", source="demand")
    classifier = SceneClassifier(
        config.template, config.threshold, window=config.window, period=config.period, psi=config.psi
    )
    pairs = list(zip(trace.seconds.tolist(), trace.load.tolist()))
    start = time.perf_counter()
    for seconds, load in pairs:
        classifier.push(seconds, load)
    first = (time.perf_counter() - start) / len(pairs) * 1e6
    offset = pairs[-1][0] + config.period
    start = time.perf_counter()
    for seconds, load in pairs:
        classifier.push(seconds + offset, load)
    steady = (time.perf_counter() - start) / len(pairs) * 1e6
    print(
        f"classifier (M {config.window}, a DTW every sample): {steady:.0f} µs per sample once the window is full "
        f"({first:.0f} µs over the first pass, start-up included); {len(pairs)} samples of tests/dvfs/data/cnn.csv"
    )


def governor_cpu(seconds: float) -> None:
    """`edgecnn govern` sampling live for ``seconds`` on a fake cpufreq tree (it pins and releases
    there as it would on a real one); its own report of its CPU time while running."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "cpu"
        policy = root / "cpufreq" / "policy0"
        policy.mkdir(parents=True)
        for name, value in {
            "scaling_available_frequencies": "700000 1400000 1800000",
            "scaling_available_governors": "schedutil userspace",
            "scaling_governor": "schedutil",
            "scaling_min_freq": "700000",
            "scaling_max_freq": "1800000",
            "scaling_setspeed": "<unsupported>",
        }.items():
            (policy / name).write_text(value + "\n")
        (root / "cpu0").mkdir()
        (root / "cpu0" / "cpufreq").symlink_to(policy)
        command = [sys.executable, "-m", "edgecnn", "govern", "--duration", str(seconds), "--cpus", "0"]
        command += ["--cpufreq-root", str(root), "--journal", str(Path(scratch) / "journal.json")]
        result = subprocess.run(command, capture_output=True, text=True, check=True)
    line = next(line for line in result.stdout.splitlines() if "of CPU in" in line)
    print(f"edgecnn govern, live for {seconds:g} s on a fake tree: {line.strip()}")
    share = float(re.search(r"\(([\d.]+)% of one core\)", line).group(1)) / 100  # type: ignore[union-attr]
    model = EXYNOS5422_A15
    watts = model.power(model.top, share) - model.power(model.top, 0)
    print(
        f"  at that share of one core, the processor model's dynamic power at its top level: {watts * 1e3:.1f} mW "
        f"(an estimate: this VM has no power meter)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    print(machine_line())
    dtw_table()
    classifier_cost()
    governor_cpu(args.seconds)
    print(machine_line())


if __name__ == "__main__":
    main()
