"""Start-up cost: the first inference of a zoo model in a fresh Python process (import, load,
plan, kernel compilation or compile-cache load, first run), then the steady-state run.

    python benchmarks/startup.py [--model resnet50] [--runs 3]

Each measurement is a separate interpreter, so numba's on-disk cache is what makes later runs
fast; the first run after a kernel change (or on a fresh checkout) shows the cold compile cost."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = """
import json, sys, time
for name in {blocked!r}:
    sys.modules[name] = None  # as if not installed: importing it raises ImportError
t0 = time.perf_counter()
import numpy as np
import edgecnn
from pathlib import Path
from edgecnn.bench.zoo import model_path
path = model_path({model!r}, Path.home() / ".cache" / "edgecnn" / "bench")
t1 = time.perf_counter()
model = edgecnn.load(path)
spec = model.inputs[0]
x = np.random.default_rng(0).standard_normal([1, *spec.shape[1:]]).astype(np.float32)
t2 = time.perf_counter()
model(x)
t3 = time.perf_counter()
model(x)
t4 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "load": t2 - t1, "first_run": t3 - t2, "second_run": t4 - t3,
                  "first_inference_total": t3 - t0}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--cold", action="store_true", help="Start with an empty numba cache (NUMBA_CACHE_DIR)."
    )
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        metavar="PACKAGE",
        help="Run as if PACKAGE were not installed (e.g. scipy, which numba imports at start when present).",
    )
    args = parser.parse_args()
    env = dict(os.environ)
    for run in range(args.runs):
        if args.cold:
            env["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="edgecnn-cold-cache-")
        out = subprocess.run(
            [sys.executable, "-c", CHILD.format(model=args.model, blocked=tuple(args.without))],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        timings = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"process {run + 1}: " + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in timings.items()))


if __name__ == "__main__":
    main()
