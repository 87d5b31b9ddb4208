"""Soak tests: does memory stay flat over many runs of one model, and over many load/unload cycles?

    .venv/bin/python lab/soak.py runs --count 10000          # one Model, 10,000 runs
    .venv/bin/python lab/soak.py load-unload --count 1000    # 1,000 x (load, run, drop)
    .venv/bin/python lab/soak.py concurrent --count 10000 --model resnet18   # 8 threads share one Model

The model is a zoo model written to a temporary ONNX file (``--model``, default lenet5, and
``--format ecnn`` to load it through an .ecnn file instead). The resident set size (RSS, from
/proc/self/statm) is sampled ``--samples`` times (in load-unload mode after a full garbage
collection); after the first ``--warmup`` share of the iterations (allocator and plan caches
filling), the least-squares slope of RSS against the iteration is the leak rate. Every output is
compared with the first, bit for bit. ``--json`` prints one JSON object (what
tests/reliability/test_soak.py reads); otherwise a table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import edgecnn
from edgecnn.bench.zoo import build_model

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * PAGE


def model_file(name: str, fmt: str, folder: Path) -> Path:
    onnx_path = folder / f"{name}.onnx"
    onnx.save(build_model(name), str(onnx_path))
    if fmt == "onnx":
        return onnx_path
    ecnn_path = folder / f"{name}.ecnn"
    edgecnn.load(onnx_path).save(ecnn_path)
    return ecnn_path


def slope_per_1000(points: list[tuple[int, int]]) -> float:
    """Least-squares growth of RSS in bytes per 1000 iterations."""
    x = np.array([p[0] for p in points], np.float64)
    y = np.array([p[1] for p in points], np.float64)
    if len(x) < 2 or np.ptp(x) == 0:
        return 0.0
    return float(np.polyfit(x, y, 1)[0] * 1000)


def soak(
    mode: str, path: Path, count: int, samples: int, warmup: float, threads: int, callers: int
) -> dict[str, Any]:
    every = max(1, count // samples)
    model = edgecnn.load(path, threads=threads)
    spec = model.inputs[0]
    shape = [d if isinstance(d, int) else 1 for d in spec.shape or ()]
    x = np.random.default_rng(0).standard_normal(shape).astype(spec.dtype)
    first = model(x).tobytes()

    def iteration(_: int) -> bool:
        """One run (of a fresh load in load-unload mode); whether its output differs from the first."""
        runner = edgecnn.load(path, threads=threads) if mode == "load-unload" else model
        return bool(runner(x).tobytes() != first)

    points: list[tuple[int, int]] = []
    mismatches = 0
    start = time.perf_counter()
    with ThreadPoolExecutor(callers if mode == "concurrent" else 1) as pool:
        for chunk_start in range(0, count, every):
            chunk = range(chunk_start, min(count, chunk_start + every))
            mismatches += sum(pool.map(iteration, chunk))
            if mode == "load-unload":
                gc.collect()  # dropped models, at samples only: a full collection costs more than a load
            points.append((chunk[-1], rss()))
    seconds = time.perf_counter() - start
    measured = [p for p in points if p[0] >= warmup * count]
    return {
        "mode": mode,
        "callers": callers if mode == "concurrent" else 1,
        "model": path.name,
        "iterations": count,
        "seconds": round(seconds, 2),
        "per_second": round(count / seconds, 1),
        "rss_start_mib": round(points[0][1] / 2**20, 1),
        "rss_after_warmup_mib": round(measured[0][1] / 2**20, 1),
        "rss_end_mib": round(points[-1][1] / 2**20, 1),
        "rss_max_mib": round(max(p[1] for p in points) / 2**20, 1),
        "growth_after_warmup_kib": round((measured[-1][1] - measured[0][1]) / 1024, 1),
        "slope_kib_per_1000": round(slope_per_1000(measured) / 1024, 1),
        "mismatches": mismatches,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=("runs", "load-unload", "concurrent"))
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--model", default="lenet5", help="a zoo model (edgecnn bench --list)")
    parser.add_argument("--format", choices=("onnx", "ecnn"), default="onnx")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--warmup", type=float, default=0.1, help="share of iterations before measuring")
    parser.add_argument("--threads", type=int, default=1, help="each run's numba threads")
    parser.add_argument("--callers", type=int, default=8, help="threads running the model in concurrent mode")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = model_file(args.model, args.format, Path(folder))
        result = soak(args.mode, path, args.count, args.samples, args.warmup, args.threads, args.callers)
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:>26}  {value}")


if __name__ == "__main__":
    main()
