"""What a parallel region costs numba's OpenMP pool after a pause, with and without the spin
(kernels/cpu/threads.py, SPIN_COUNT): why the pool spins ~0.3 ms before its workers sleep.

Each setting runs in its own child process (the OpenMP runtime reads its spin count once, when
numba's pool starts). A child starts the pool the way a run does (``threads.current_threads()``),
then times a compiled function whose parallel region gives each of two threads one element, after a
busy Python pause of each length (the Python between a run's steps), interleaved. Writes the table
into docs/tuning.md between its markers.

    .venv/bin/python benchmarks/wake.py --rounds 400
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
from edgecnn.kernels.cpu.threads import SPIN_COUNT

DOC = Path(__file__).parent.parent / "docs" / "tuning.md"
PAUSES_US = (0, 20, 50, 100, 200, 400, 1000)

_CHILD = """
import json, sys, time
import numba, numpy as np
from edgecnn.kernels.cpu import threads

threads.current_threads()  # starts the pool as a run does


@numba.njit(parallel=True)
def region(out):
    for i in numba.prange(2):
        out[i] += 1.0


@numba.njit
def serial(out):
    out[0] += 1.0


out = np.zeros(2, dtype=np.float32)
region(out)
serial(out)
pauses, rounds = json.loads(sys.argv[1]), int(sys.argv[2])
times = {str(p): [] for p in pauses}
times["serial"] = []
for _ in range(rounds):
    for pause in pauses:
        until = time.perf_counter() + pause * 1e-6
        while time.perf_counter() < until:
            pass
        start = time.perf_counter()
        region(out)
        times[str(pause)].append(time.perf_counter() - start)
    start = time.perf_counter()
    serial(out)
    times["serial"].append(time.perf_counter() - start)
print(json.dumps({key: float(np.median(values)) * 1e6 for key, values in times.items()}))
"""


def measure(spin: str | None, rounds: int) -> dict[str, float]:
    """Median microseconds per pause (and of the serial call) in a child with GOMP_SPINCOUNT=spin."""
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    if spin is not None:
        env["GOMP_SPINCOUNT"] = spin
    child = [sys.executable, "-c", _CHILD, json.dumps(PAUSES_US), str(rounds)]
    result = subprocess.run(child, env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--output", type=Path, default=DOC)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    settings = {"0 (sleep at once)": "0", f"{SPIN_COUNT} (default)": None}
    rows = {label: measure(spin, args.rounds) for label, spin in settings.items()}
    lines = [
        "### Waking the pool",
        "",
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'PASSIVE')}.",
        "",
        f"Command: `.venv/bin/python benchmarks/wake.py --rounds {args.rounds}`",
        "",
        "Median us of one parallel region over 2 threads after a busy pause of the calling thread, "
        "by GOMP_SPINCOUNT (a compiled call without a parallel region for scale):",
        "",
        "| GOMP_SPINCOUNT | " + " | ".join(f"after {p} us" for p in PAUSES_US) + " | serial call |",
        "|---|" + "---:|" * (len(PAUSES_US) + 1),
    ]
    for label, times in rows.items():
        cells = [f"{times[str(p)]:.1f}" for p in PAUSES_US] + [f"{times['serial']:.1f}"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    args.output.write_text(replace_section(args.output.read_text(), "tuning:pool-wake", lines))


if __name__ == "__main__":
    main()
