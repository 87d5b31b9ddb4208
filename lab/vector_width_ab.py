"""Loops that LLVM vectorises itself at 256 or at 512 bits, whole zoo models timed in alternating
child processes (issue 36).

LLVM's tuning for Intel's AVX-512 cores (skylake-avx512 onwards, rocketlake, sapphirerapids...)
carries ``prefer-256-bit``: its loop vectorizer then uses 256-bit vectors even where the CPU has
512-bit ones (znver4's tuning does not). edgecnn's explicit vector code (the GEMM and int8
micro-kernels) is 512-bit either way; every other compiled loop (depthwise passes, activations,
pooling, packing, transforms) follows the tuning. This compares, on this CPU, numba's default
features with the same features plus ``-prefer-256-bit`` (NUMBA_CPU_FEATURES, in a separate
NUMBA_CACHE_DIR, so the shared cache is untouched; the first round compiles that variant's kernels).
Each child loads the models and prints the median Model.run ms of ``--runs`` runs per model; the
variants alternate for ``--rounds`` rounds and the table gives the median over the rounds.

    .venv/bin/python lab/vector_width_ab.py [--models efficientnet-b0,squeezenet1.1] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx

from common import machine_line
from edgecnn.bench.zoo import build_model

CHILD = """
import json, sys, time
import numpy as np
import edgecnn
runs, result = int(sys.argv[1]), {}
for path in sys.argv[2:]:
    net = edgecnn.load(path, threads=2)
    spec = net.inputs[0]
    feed = {spec.name: np.random.default_rng(0).standard_normal((1, *spec.shape[1:])).astype(np.float32)}
    for _ in range(5):
        net.run(feed)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        net.run(feed)
        times.append(time.perf_counter() - start)
    result[path] = float(np.median(times) * 1e3)
print(json.dumps(result))
"""

DEFAULT_MODELS = "efficientnet-b0,mobilenetv3-large,pp-lcnet,squeezenet1.1,resnet50,mobilenetv2"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="NUMBA_CACHE_DIR of the 512-bit variant (default: a new one, filled in round 1)",
    )
    args = parser.parse_args()
    from numba.core.codegen import get_host_cpu_features

    features = os.environ.get("NUMBA_CPU_FEATURES") or get_host_cpu_features()
    names = args.models.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name in names:
            paths.append(str(Path(tmp) / f"{name}.onnx"))
            onnx.save(build_model(name), paths[-1])
        variants = {
            "default": dict(os.environ),
            "512-bit": {
                **os.environ,
                "NUMBA_CPU_FEATURES": features + ",-prefer-256-bit",
                "NUMBA_CACHE_DIR": args.cache_dir or str(Path(tmp) / "numba-512"),
            },
        }
        samples: dict[str, dict[str, list[float]]] = {v: {p: [] for p in paths} for v in variants}
        for number in range(args.rounds):
            for variant, env in variants.items():
                child = subprocess.run(
                    [sys.executable, "-c", CHILD, str(args.runs), *paths],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                for path, ms in json.loads(child.stdout.strip().splitlines()[-1]).items():
                    samples[variant][path].append(ms)
            print(f"round {number + 1}/{args.rounds} done", file=sys.stderr)
    print(machine_line(2))
    print("| model | default ms | -prefer-256-bit ms | ratio | rounds (default / 512-bit) |")
    print("|---|---:|---:|---:|---|")
    for name, path in zip(names, paths):
        a, b = samples["default"][path], samples["512-bit"][path]
        rounds = " ".join(f"{x:.2f}" for x in a) + " / " + " ".join(f"{x:.2f}" for x in b)
        ratio = statistics.median(b) / statistics.median(a)
        print(
            f"| {name} | {statistics.median(a):.2f} | {statistics.median(b):.2f} | {ratio:.3f} | {rounds} |"
        )


if __name__ == "__main__":
    main()
