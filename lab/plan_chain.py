"""How planning time grows with graph size: a chain of N Relu nodes, loaded (passes) and planned.

Issue 34 measured 99 s for a 40,000-node chain; the buffer planner's in-place test walked every
member of a growing buffer (quadratic) and the arena placement compared each buffer with all
placed before it. Each size runs in a fresh process (numba's kernels compiled once beforehand, in
that process, on a 3-node chain), so the figures are the passes' and the planner's time alone.
"cpu s" is the process's CPU time over both, less sensitive than wall time to a shared machine.

    .venv/bin/python lab/plan_chain.py                    # 5k, 10k, 20k, 40k nodes
    .venv/bin/python lab/plan_chain.py --sizes 1000 4000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from common import machine_line

CHILD = """
import json, sys, time
import numpy as np
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.registry import NoAttrs
from edgecnn.runtime.options import RuntimeOptions

def chain(n):
    nodes = [Node("Relu", f"r{i}", [f"t{i}"], [f"t{i + 1}"], NoAttrs()) for i in range(n)]
    return Graph(inputs=[TensorSpec("t0", "float32", (1, 8))], outputs=[f"t{n}"], nodes=nodes, name="chain")

options = RuntimeOptions.resolve(threads=1)
x = np.ones((1, 8), np.float32)
Model(chain(3), options).run(x)  # compile the kernels outside the timing
graph = chain(int(sys.argv[1]))
start, cpu = time.perf_counter(), time.process_time()
model = Model(graph, options)
loaded = time.perf_counter()
model.run(x)
planned = time.perf_counter()
cpu = time.process_time() - cpu
print(json.dumps({"load_s": loaded - start, "plan_and_run_s": planned - loaded, "cpu_s": cpu}))
"""


def measure(nodes: int) -> dict[str, float]:
    """Load and first-run seconds of an ``nodes``-long chain, in a child process."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(nodes)], check=True, capture_output=True, text=True
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000, 20000, 40000])
    args = parser.parse_args()
    print(machine_line(threads=1))
    print(f"{'nodes':>8} {'load s':>8} {'plan+run s':>11} {'total s':>8} {'cpu s':>8} {'us/node':>8}")
    for nodes in args.sizes:
        r = measure(nodes)
        total = r["load_s"] + r["plan_and_run_s"]
        line = f"{nodes:>8} {r['load_s']:>8.2f} {r['plan_and_run_s']:>11.2f} {total:>8.2f} {r['cpu_s']:>8.2f}"
        print(f"{line} {total / nodes * 1e6:>8.0f}")


if __name__ == "__main__":
    main()
