"""How far apart this VM's two vCPUs are right now: the cross-core round trip of a cache line.

On the 2-core KVM machine of docs/benchmarks.md the round trip swings between about 100 ns and
about 450 ns for minutes at a time: the hypervisor moves the vCPUs between cores of one die and
cores of different dies. Those are the "slow phases" of docs/tuning.md: every line one core writes
and the other reads (a layer's output split by channels, read whole by the next layer) costs 4x.
benchmarks/rule_ab.py --phases tags each block of its runs with this reading.

    .venv/bin/python benchmarks/core_distance.py          # prints the round trip in ns
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("core_round_trip.c")

FAR_NS = 250.0
"""Round trips above this count as cores far apart (readings cluster near 100 and near 450 ns)."""


@functools.cache
def _program() -> Path:
    """core_round_trip.c compiled once per process (needs a C compiler: cc)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("core_distance needs a C compiler (cc or gcc) on PATH")
    target = Path(tempfile.mkdtemp(prefix="edgecnn-core-distance-")) / "core_round_trip"
    subprocess.run([compiler, "-O2", "-pthread", str(SOURCE), "-o", str(target)], check=True)
    return target


def round_trip_ns() -> float:
    """One reading (200,000 hand-overs, about 20-90 ms); needs CPUs 0 and 1."""
    if len(os.sched_getaffinity(0)) < 2:
        raise RuntimeError("core_distance needs two CPUs")
    out = subprocess.run([str(_program())], capture_output=True, text=True, check=True)
    return float(out.stdout)


def far_apart(round_trip: float) -> bool:
    return round_trip > FAR_NS


if __name__ == "__main__":
    print(f"{round_trip_ns():.1f} ns")
