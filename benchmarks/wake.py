"""What a parallel region costs numba's OpenMP pool, with its workers spinning between regions
(libgomp's ``GOMP_SPINCOUNT``) and without: why kernels/cpu/threads.py leaves the pool asleep.

Each setting runs in its own child process (the OpenMP runtime reads its spin count once, when
numba's pool starts). A child starts the pool the way a run does (``threads.current_threads()``),
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

from sections import replace_section

from edgecnn.bench.machine import cpu_model

DOC = Path(__file__).parent.parent / "docs" / "tuning.md"
PAUSES_US = (0, 20, 50, 200)
SPINS = ("0", "3000", "10000")

_CHILD = """
import json, sys, time
import numba, numpy as np
from edgecnn.kernels.cpu import threads

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
print(json.dumps({key: float(np.median(values)) * 1e6 for key, values in times.items()}))
"""


def measure(spin: str, rounds: int) -> dict[str, float]:
    """Median microseconds per case in a child with GOMP_SPINCOUNT=spin."""
    env = dict(os.environ, GOMP_SPINCOUNT=spin)
    child = [sys.executable, "-c", _CHILD, json.dumps(PAUSES_US), str(rounds)]
    result = subprocess.run(child, env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--output", type=Path, default=DOC)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows = {spin: measure(spin, args.rounds) for spin in SPINS}
    lines = [
        "### Waking the pool",
        "",
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'PASSIVE')}.",
        "",
        f"Command: `.venv/bin/python benchmarks/wake.py --rounds {args.rounds}`",
        "",
        "Median us of one parallel region over 2 threads, by GOMP_SPINCOUNT (0: what edgecnn runs with): "
        "after a busy pause of the calling thread, and the first three regions after a 20 ms sleep:",
        "",
        "| GOMP_SPINCOUNT | "
        + " | ".join(f"after {p} us" for p in PAUSES_US)
        + " | 1st after sleep | 2nd | 3rd |",
        "|---|" + "---:|" * (len(PAUSES_US) + 3),
    ]
    for spin, times in rows.items():
        cells = [f"{times[str(p)]:.1f}" for p in PAUSES_US] + [
            f"{times[k]:.1f}" for k in ("sleep1", "sleep2", "sleep3")
        ]
        lines.append(f"| {spin} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    args.output.write_text(replace_section(args.output.read_text(), "tuning:pool-wake", lines))


if __name__ == "__main__":
    main()
