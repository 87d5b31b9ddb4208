"""Where loading and planning time goes as a graph grows, for three graph shapes (issue 34).

Shapes, each of about N nodes on a tiny tensor so that the graph's size is all that is measured:
``relu`` a chain of Relu; ``convrelu`` a chain of 3x3 Conv + Relu pairs (the passes fuse each pair,
kernel selection runs the convolution family's rules); ``branching`` blocks of four Relu -> Sigmoid
branches joined by Adds (many branches, a few alive at once); ``wide`` N/3 branches of Relu ->
Sigmoid off one input, summed by a tree of Add (every branch alive at once). Each size runs in a fresh
child process that first plans a small graph of the same shape (numba's kernels compiled outside
the timing), then reports the CPU time of ``Model(graph)`` (verification and passes) and of the
first ``run`` (planning and one run), and how many structural graph copies loading made.

    .venv/bin/python lab/planning_scale.py                          # every shape, 10k 20k 40k
    .venv/bin/python lab/planning_scale.py --shapes relu --sizes 40000
    .venv/bin/python lab/planning_scale.py --profile relu 40000     # cProfile, top functions
    .venv/bin/python lab/planning_scale.py zoo --before HEAD~3      # zoo load times, interleaved

``zoo`` times ``edgecnn.load`` of zoo models (ResNet-50, MobileNetV2 ONNX) with the package at
``--before`` and with this tree, in alternating child processes (A B A B ...), medians and spread.
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

from common import REPO, machine_line, package_sources, run_child

CHILD = r"""
import cProfile, json, pstats, sys, time
import numpy as np
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.registry import NoAttrs, get_op
from edgecnn.runtime.options import RuntimeOptions

def relu(n):
    nodes = [Node("Relu", f"r{i}", [f"t{i}"], [f"t{i + 1}"], NoAttrs()) for i in range(n)]
    return Graph([TensorSpec("t0", "float32", (1, 8))], [f"t{n}"], nodes, name="relu"), (1, 8)

def convrelu(n):
    attrs = get_op("Conv").attrs_type(kernel_shape=(3, 3), pads=(1, 1, 1, 1))
    nodes, inits = [], {}
    rng = np.random.default_rng(0)
    for i in range(max(1, n // 2)):
        inits[f"w{i}"] = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
        nodes.append(Node("Conv", f"c{i}", [f"t{i}", f"w{i}"], [f"u{i}"], attrs))
        nodes.append(Node("Relu", f"r{i}", [f"u{i}"], [f"t{i + 1}"], NoAttrs()))
    out = f"t{max(1, n // 2)}"
    return Graph([TensorSpec("t0", "float32", (1, 4, 6, 6))], [out], nodes, inits, name="convrelu"), (1, 4, 6, 6)

def wide(n):
    branches = max(2, n // 3)
    nodes, level = [], []
    for i in range(branches):
        nodes.append(Node("Relu", f"r{i}", ["x"], [f"a{i}"], NoAttrs()))
        nodes.append(Node("Sigmoid", f"s{i}", [f"a{i}"], [f"b{i}"], NoAttrs()))
        level.append(f"b{i}")
    k = 0
    while len(level) > 1:
        nxt = []
        for j in range(0, len(level) - 1, 2):
            nodes.append(Node("Add", f"add{k}", [level[j], level[j + 1]], [f"s_{k}"], NoAttrs()))
            nxt.append(f"s_{k}")
            k += 1
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return Graph([TensorSpec("x", "float32", (1, 8))], level, nodes, name="wide"), (1, 8)

def branching(n):
    nodes, x = [], "x"
    for b in range(max(1, n // 11)):
        ends = []
        for i in range(4):
            nodes.append(Node("Relu", f"r{b}_{i}", [x], [f"a{b}_{i}"], NoAttrs()))
            nodes.append(Node("Sigmoid", f"s{b}_{i}", [f"a{b}_{i}"], [f"e{b}_{i}"], NoAttrs()))
            ends.append(f"e{b}_{i}")
        nodes.append(Node("Add", f"p{b}", ends[:2], [f"p{b}"], NoAttrs()))
        nodes.append(Node("Add", f"q{b}", ends[2:], [f"q{b}"], NoAttrs()))
        nodes.append(Node("Add", f"x{b}", [f"p{b}", f"q{b}"], [f"x{b}"], NoAttrs()))
        x = f"x{b}"
    return Graph([TensorSpec("x", "float32", (1, 8))], [x], nodes, name="branching"), (1, 8)

shape, n, profile = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
build = {"relu": relu, "convrelu": convrelu, "wide": wide, "branching": branching}[shape]
options = RuntimeOptions.resolve(threads=1)
small, dims = build(6)
x = np.ones(dims, np.float32)
Model(small, options).run(x)  # compile the kernels outside the timing
graph, _ = build(n)
copies = [0]
original_copy = Graph.copy
def counted_copy(self):
    copies[0] += 1
    return original_copy(self)
Graph.copy = counted_copy
profiler = cProfile.Profile() if profile else None
if profiler:
    profiler.enable()
c0 = time.process_time()
w0 = time.perf_counter()
model = Model(graph, options)
c1 = time.process_time()
w1 = time.perf_counter()
model.run(x)
c2 = time.process_time()
w2 = time.perf_counter()
if profiler:
    profiler.disable()
    pstats.Stats(profiler, stream=sys.stderr).sort_stats(sys.argv[4] if len(sys.argv) > 4 else "cumulative").print_stats(40)
print(json.dumps({"nodes": len(graph.nodes), "load_cpu": c1 - c0, "run_cpu": c2 - c1,
                  "load_wall": w1 - w0, "run_wall": w2 - w1, "copies": copies[0]}))
"""

ZOO_CHILD = r"""
import json, sys, time
import edgecnn
paths, rounds = sys.argv[1:-1], int(sys.argv[-1])
for p in paths:
    edgecnn.load(p, threads=1)  # imports and first-use caches outside the timing
out = {}
for p in paths:
    times = []
    for _ in range(rounds):
        c = time.perf_counter()
        edgecnn.load(p, threads=1)
        times.append(time.perf_counter() - c)
    out[p] = sorted(times)[len(times) // 2]
print(json.dumps(out))
"""


def measure(shape: str, nodes: int) -> dict[str, float]:
    """Load and first-run CPU seconds of an ``nodes``-node graph of ``shape``, in a child process."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, shape, str(nodes), "0"], check=True, capture_output=True, text=True
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def scale(shapes: list[str], sizes: list[int]) -> None:
    print(machine_line(threads=1))
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    head = f"{'shape':>9} {'nodes':>7} {'copies':>6} {'load cpu s':>10} {'plan+run cpu s':>14}"
    print(f"{head} {'total cpu s':>11} {'wall s':>7} {'us/node':>8}")
    for shape in shapes:
        for n in sizes:
            r = measure(shape, n)
            cpu = r["load_cpu"] + r["run_cpu"]
            wall = r["load_wall"] + r["run_wall"]
            line = f"{shape:>9} {int(r['nodes']):>7} {int(r['copies']):>6} {r['load_cpu']:>10.2f}"
            print(f"{line} {r['run_cpu']:>14.2f} {cpu:>11.2f} {wall:>7.2f} {cpu / r['nodes'] * 1e6:>8.0f}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


def zoo(before: str, models: list[str], pairs: int, rounds: int) -> None:
    """Median load seconds of each zoo model, ``before`` against this tree, interleaved."""
    from edgecnn.bench.zoo import default_cache_dir, model_path

    paths = [str(model_path(name, default_cache_dir())) for name in models]
    print(machine_line(threads=1))
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        sources = package_sources(before, Path(tmp))
        samples: dict[str, dict[str, list[float]]] = {v: {p: [] for p in paths} for v in sources}
        for _ in range(pairs):
            for version, source in sources.items():
                got = run_child(source, [sys.executable, "-c", ZOO_CHILD, *paths, str(rounds)])
                assert isinstance(got, dict)
                for p in paths:
                    samples[version][p].append(float(got[p]))
    print(f"{'model':>14} {'before ms':>18} {'after ms':>18} {'after/before':>12}")
    for name, p in zip(models, paths):
        cells = []
        for version in sources:
            values = samples[version][p]
            cells.append((statistics.median(values), min(values), max(values)))
        text = [f"{m * 1e3:.0f} ({lo * 1e3:.0f}-{hi * 1e3:.0f})" for m, lo, hi in cells]
        print(f"{name:>14} {text[0]:>18} {text[1]:>18} {cells[1][0] / cells[0][0]:>12.2f}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}; {pairs} child pairs of {rounds} loads each")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", nargs="?", choices=("scale", "zoo"), default="scale")
    parser.add_argument("--shapes", nargs="+", default=["relu", "convrelu", "branching"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 20000, 40000])
    parser.add_argument("--profile", nargs=2, metavar=("SHAPE", "NODES"))
    parser.add_argument("--before", default="HEAD", help="zoo: the revision to compare with")
    parser.add_argument("--models", nargs="+", default=["resnet50", "mobilenetv2"])
    parser.add_argument("--pairs", type=int, default=5, help="zoo: child processes per version")
    parser.add_argument("--rounds", type=int, default=5, help="zoo: loads per child (median kept)")
    args = parser.parse_args()
    if args.profile:
        shape, nodes = args.profile
        subprocess.run([sys.executable, "-c", CHILD, shape, nodes, "1"], check=True, cwd=REPO)
    elif args.mode == "zoo":
        zoo(args.before, args.models, args.pairs, args.rounds)
    else:
        scale(args.shapes, args.sizes)


if __name__ == "__main__":
    main()
