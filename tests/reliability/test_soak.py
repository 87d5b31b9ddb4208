"""Short versions of lab/soak.py: many runs of one model (from one thread, and from 8 at once), and
load/run/drop cycles, keep the resident set flat and every output bit-identical to the first (the long runs and their figures:
docs/reliability.md). Run as a child so the test process's own allocations do not blur the RSS."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SOAK = Path(__file__).resolve().parents[2] / "lab" / "soak.py"
GROWTH_LIMIT_KIB = 2048
"""A leak of 4 KiB per run, or of 40 KiB per load, goes over it in the short runs below."""


def soak(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(SOAK), *args, "--json"], capture_output=True, text=True,
                          timeout=300, check=True)  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "--count", "600", "--samples", "30"),
        ("concurrent", "--count", "800", "--samples", "30"),
        ("load-unload", "--count", "60", "--samples", "6"),
    ],
    ids=["runs", "concurrent", "load-unload"],
)
def test_memory_stays_flat(args: tuple[str, ...]) -> None:
    result = soak(*args)
    assert result["mismatches"] == 0, result
    assert result["growth_after_warmup_kib"] < GROWTH_LIMIT_KIB, result
