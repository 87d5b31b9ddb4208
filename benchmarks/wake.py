"""What a parallel region costs numba's pool: on TBB (edgecnn's default where the ``tbb`` package
is installed), and on OpenMP with its workers asleep between regions or spinning (libgomp's
``GOMP_SPINCOUNT``): why kernels/cpu/system/threads.py loads TBB and does not make OpenMP spin.

Each setting runs in its own child process (the threading layer and OpenMP's spin count are fixed
when numba's pool starts). A child starts the pool the way a run does (``threads.current_threads()``),
then times a compiled function whose parallel region gives each of two threads one element: after
busy Python pauses as long as the Python between a run's steps, and, as a run after an idle spell
(`edgecnn bench` pauses 20 ms between runs; a camera pipeline waits for its next frame), the first
three regions after a 20 ms sleep. Writes the table into docs/tuning.md between its markers.

    .venv/bin/python benchmarks/wake.py --rounds 200
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sections import replace_section

from edgecnn.bench.machine import cpu_model

DOC = Path(__file__).parent.parent / "docs" / "tuning.md"
PAUSES_US = (0, 20, 50, 200)
SETTINGS = {
    "TBB (default)": {"NUMBA_THREADING_LAYER": "tbb"},
    "OpenMP, GOMP_SPINCOUNT=0": {"NUMBA_THREADING_LAYER": "omp", "GOMP_SPINCOUNT": "0"},
    "OpenMP, GOMP_SPINCOUNT=3000": {"NUMBA_THREADING_LAYER": "omp", "GOMP_SPINCOUNT": "3000"},
    "OpenMP, GOMP_SPINCOUNT=10000": {"NUMBA_THREADING_LAYER": "omp", "GOMP_SPINCOUNT": "10000"},
    "OpenMP, GOMP_SPINCOUNT=30000": {"NUMBA_THREADING_LAYER": "omp", "GOMP_SPINCOUNT": "30000"},
}

_CHILD = """
import json, sys, time
import numba, numpy as np
from edgecnn.kernels.cpu.system import threads

threads.current_threads()  # starts the pool as a run does


@numba.njit(parallel=True)
def region(out):
    for i in numba.prange(2):
        out[i] += 1.0


out = np.zeros(2, dtype=np.float32)
region(out)
pauses, rounds = json.loads(sys.argv[1]), int(sys.argv[2])
times = {key: [] for key in [str(p) for p in pauses] + ["sleep1", "sleep2", "sleep3"]}


def timed(key):
    start = time.perf_counter()
    region(out)
    times[key].append(time.perf_counter() - start)


for _ in range(rounds):
    for pause in pauses:
        until = time.perf_counter() + pause * 1e-6
        while time.perf_counter() < until:
            pass
        timed(str(pause))
    time.sleep(0.02)
    for key in ("sleep1", "sleep2", "sleep3"):
        timed(key)
result = {key: float(np.median(values)) * 1e6 for key, values in times.items()}
result["layer"] = numba.threading_layer()
print(json.dumps(result))
"""


def measure(setting: dict[str, str], rounds: int) -> dict[str, Any]:
    """Median microseconds per case in a child with ``setting`` in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "NUMBA_THREADING_LAYER")}
    env.update(setting)
    child = [sys.executable, "-c", _CHILD, json.dumps(PAUSES_US), str(rounds)]
    result = subprocess.run(child, env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--output", type=Path, default=DOC)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows = {label: measure(setting, args.rounds) for label, setting in SETTINGS.items()}
    lines = [
        "### Waking the pool",
        "",
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'PASSIVE')}.",
        "",
        f"Command: `.venv/bin/python benchmarks/wake.py --rounds {args.rounds}`",
        "",
        "Median us of one parallel region over 2 threads, by threading layer (in brackets the layer each child "
        "actually ran on): after a busy pause of the calling thread, and the first three "
        "regions after a 20 ms sleep:",
        "",
        "| pool | " + " | ".join(f"after {p} us" for p in PAUSES_US) + " | 1st after sleep | 2nd | 3rd |",
        "|---|" + "---:|" * (len(PAUSES_US) + 3),
    ]
    for label, times in rows.items():
        cells = [f"{times[str(p)]:.1f}" for p in PAUSES_US] + [
            f"{times[k]:.1f}" for k in ("sleep1", "sleep2", "sleep3")
        ]
        lines.append(f"| {label} [{times['layer']}] | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    args.output.write_text(replace_section(args.output.read_text(), "tuning:pool-wake", lines))


if __name__ == "__main__":
    main()
