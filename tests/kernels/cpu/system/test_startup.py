"""The CPU runtime's explicit start-up (kernels/cpu/system/startup.py): importing changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

_PROBE = """
import json, os
import numba
import edgecnn.kernels.cpu
from edgecnn.kernels.registry import import_pending
from edgecnn.kernels.cpu.system import affinity, startup
import_pending("cpu")  # every kernel module imported
seen = {"imported": [os.environ.get("OMP_WAIT_POLICY"), startup.tbb_library(), affinity._binding]}
startup.initialize_cpu_runtime(bind_threads=False)
startup.initialize_cpu_runtime(bind_threads=True)  # the first call decided
seen["initialized"] = [os.environ.get("OMP_WAIT_POLICY"), affinity._binding]
print(json.dumps(seen))
"""


def test_importing_changes_nothing_and_the_first_initialization_decides() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=300, check=True
    )
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["imported"] == [None, None, False]
    assert seen["initialized"] == ["PASSIVE", False]
