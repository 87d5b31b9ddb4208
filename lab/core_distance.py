"""How far apart this VM's two vCPUs are right now: the cross-core round trip of a cache line.

On the 2-core KVM machine of docs/benchmarks.md the round trip swings between about 100 ns and
about 450 ns for minutes at a time: the hypervisor moves the vCPUs between cores of one die and
cores of different dies. Those are the "slow phases" of lab/notes/2026-11-tuning.md: every line one
core writes and the other reads (a layer's output split by channels, read whole by the next layer)
costs 4x. rule_ab.py --phases tags each block of its runs with this reading (common.round_trip_ns).

    .venv/bin/python lab/core_distance.py          # prints the round trip in ns
"""

from __future__ import annotations

import argparse

from common import FAR_NS, far_apart, round_trip_ns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readings", type=int, default=1, help="readings to take, one a line")
    args = parser.parse_args()
    for _ in range(args.readings):
        ns = round_trip_ns()
        print(f"{ns:.1f} ns ({'far apart' if far_apart(ns) else 'near'}; the line is {FAR_NS:g} ns)")


if __name__ == "__main__":
    main()
