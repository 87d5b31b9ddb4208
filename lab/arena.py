"""Arena execution and batch-level parallelism, measured; writes its tables into docs/memory.md.

    .venv/bin/python benchmarks/arena.py                 # everything (a few minutes on 2 cores)
    .venv/bin/python benchmarks/arena.py --quick         # small variants only, fewer runs

Memory: tracemalloc's peak above the level before one run (all Python and numpy allocations),
after warm-up, for the plain executor (every step allocates its output: "before") and the arena
executor ("after"); the same plan, kernels and threads. Latency: median of interleaved runs of both.

Batch: the same model at batch 2..8 with 2 threads, the batch whole (each layer split over the
threads) against the batch cut into min(threads, batch) slices run side by side on one thread each.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from datetime import date
from pathlib import Path

import numpy as np

from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import MODELS, default_cache_dir, model_path
from edgecnn.importers import load_graph
from edgecnn.kernels.cpu import cpu_threads
from edgecnn.model import Model
from edgecnn.runtime.arena import memory_plan
from edgecnn.runtime.batch import batch_separable, split_pays
from edgecnn.runtime.executor import execute_in_arena, execute_plain
from edgecnn.runtime.options import RuntimeOptions

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "memory.md"
BEGIN, END = "<!-- benchmarks/arena.py: begin -->", "<!-- benchmarks/arena.py: end -->"

SMALL = [  # (zoo name, width, resolution): the small variants the tests also use
    ("alexnet", 0.25, 67),
    ("googlenet", 0.25, 64),
    ("resnet18", 0.25, 64),
    ("resnet50", 0.25, 64),
    ("squeezenet1.1", 0.25, 64),
    ("mobilenetv2", 0.25, 64),
    ("shufflenetv2", 0.25, 64),
    ("vgg16", 0.25, 64),
    ("tiny-yolo", 0.25, 64),
    ("lenet5", 1.0, None),
    ("simplecnn", 1.0, None),
]
FULL = [("resnet50", 1.0, None), ("googlenet", 1.0, None)]
BATCH_MODELS = [
    (name, 1.0, None)
    for name in (
        "alexnet", "googlenet", "resnet18", "resnet50", "squeezenet1.1", "mobilenetv2", "shufflenetv2",
        "vgg16", "tiny-yolo", "lenet5",
    )
]  # fmt: skip


def load(name: str, width: float, resolution: int | None, threads: int, policy: str = "never") -> Model:
    path = model_path(name, default_cache_dir(), width, resolution)
    return Model(load_graph(path), RuntimeOptions.resolve(threads=threads, batch_parallel=policy))


def example(model: Model, batch: int = 1) -> dict[str, np.ndarray]:
    spec = model.inputs[0]
    shape = [batch if i == 0 else d for i, d in enumerate(spec.shape)]  # type: ignore[union-attr]
    return {spec.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}


def traced_peak(run: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1e3


def mib(n: float) -> str:
    if n >= 2**20:
        return f"{n / 2**20:.2f} MiB"
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{int(n)} B"


def measure_arena(name: str, width: float, resolution: int | None, threads: int, runs: int) -> list[str]:
    model = load(name, width, resolution, threads)
    feeds = example(model)
    plan = model.plan_for(feeds)
    outputs = model.graph.outputs
    memory = memory_plan(plan, frozenset(plan.slots[n] for n in outputs))
    with cpu_threads(threads):

        def plain() -> object:
            return execute_plain(plan, feeds, outputs)

        def arena() -> object:
            return execute_in_arena(plan, feeds, outputs)

        for _ in range(2):
            plain(), arena()
        before, after = traced_peak(plain), traced_peak(arena)
        plain_ms, arena_ms = [], []
        for _ in range(runs):
            plain_ms.append(timed(plain))
            arena_ms.append(timed(arena))
    label = (
        name if width == 1.0 and resolution is None else f"{name} (w{width:g}, {resolution or 'native'}px)"
    )
    t_before, t_after = statistics.median(plain_ms), statistics.median(arena_ms)
    returned = sum(np.prod(plan.types[n].shape) * np.dtype(plan.types[n].dtype).itemsize for n in outputs)
    return [
        label,
        mib(before),
        mib(after),
        mib(returned),
        mib(memory.arena_bytes),
        mib(memory.buffers.naive_bytes),
        str(len(memory.buffers.in_place)),
        f"{t_before:.2f}",
        f"{t_after:.2f}",
        f"{(t_after / t_before - 1) * 100:+.1f}%",
    ]


def measure_batch(
    name: str, width: float, resolution: int | None, threads: int, batch: int, runs: int
) -> list[str]:
    whole = load(name, width, resolution, threads, "never")
    split = load(name, width, resolution, threads, "always")
    feeds = example(whole, batch)
    for _ in range(2):
        whole.run(feeds), split.run(feeds)
    whole_ms, split_ms = [], []
    for _ in range(runs):
        whole_ms.append(timed(lambda: whole.run(feeds)))
        split_ms.append(timed(lambda: split.run(feeds)))
    a, b = statistics.median(whole_ms), statistics.median(split_ms)
    macs = whole_macs(whole, feeds) / batch
    plan = whole.plan_for(feeds)
    auto = "split" if batch_separable(plan, batch) and split_pays(plan, batch, threads) else "whole"
    return [name, str(batch), f"{macs / 1e6:.1f}", f"{a:.1f}", f"{b:.1f}", f"{a / b:.2f}x", auto]


def whole_macs(model: Model, feeds: dict[str, np.ndarray]) -> int:
    from edgecnn.analysis import analyze

    return analyze(model.plan_for(feeds), model.graph.outputs).macs


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small variants only, 5 runs")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=0, help="timed runs per model (default 15, quick 5)")
    parser.add_argument("--no-write", action="store_true", help="print, do not update docs/memory.md")
    parser.add_argument("--batch-only", action="store_true", help="only the batch split table")
    parser.add_argument(
        "--batch-models", default="", help="comma-separated zoo names (full size) for the batch table"
    )
    args = parser.parse_args()
    runs = args.runs or (5 if args.quick else 15)
    models = [] if args.batch_only else SMALL + ([] if args.quick else FULL)
    arena_rows = []
    for name, width, resolution in models:
        if name not in MODELS:
            continue
        row = measure_arena(name, width, resolution, args.threads, max(3, runs if width < 1 else runs // 3))
        print(" | ".join(row), file=sys.stderr)
        arena_rows.append(row)
    batch_rows = []
    batch_models = [("lenet5", 1.0, None), ("resnet18", 0.25, 64)] if args.quick else BATCH_MODELS
    if args.batch_models:
        batch_models = [(name, 1.0, None) for name in args.batch_models.split(",")]
    for name, width, resolution in batch_models:
        for batch in (2, 4, 8):
            row = measure_batch(name, width, resolution, args.threads, batch, max(3, runs // 3))
            if width != 1.0:
                row[0] = f"{name} (w{width:g}, {resolution}px)"
            print(" | ".join(row), file=sys.stderr)
            batch_rows.append(row)
    load_avg = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    section = "\n\n".join(
        [
            BEGIN,
            f"Measured {date.today().isoformat()} on {cpu_model()} ({len(os.sched_getaffinity(0))} of "
            f"{os.cpu_count()} cores usable by the process, {platform.system()}), {args.threads} threads, "
            f"load average {load_avg} at the end (machine-wide). Command: "
            f"`.venv/bin/python benchmarks/arena.py {' '.join(sys.argv[1:])}`.",
            "Peak bytes allocated during one steady-state run (tracemalloc, all allocations) with the plain "
            "executor (before) and the arena executor (after); *returned*: the outputs handed to the caller; "
            "*arena*: the arena's size (allocated once per concurrent run, not per run); *naive*: every tensor "
            "in a buffer of its own; latency: median ms of interleaved runs.",
            table(
                [
                    "model",
                    "allocated before",
                    "allocated after",
                    "returned",
                    "arena",
                    "naive",
                    "in-place steps",
                    "ms before",
                    "ms after",
                    "change",
                ],
                arena_rows,
            ),
            "Batch-level parallelism: median ms per run of the whole batch with intra-op threads (*whole*) and "
            f"with the batch cut into min({args.threads}, batch) slices on one thread each (*split*); "
            "MMAC: multiply-adds per image.",
            table(
                ["model", "batch", "MMAC/image", "whole ms", "split ms", "split speed-up", "auto picks"],
                batch_rows,
            ),
            END,
        ]
    )
    print(section)
    if not args.no_write:
        text = DOC.read_text()
        if BEGIN in text and END in text:
            text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END) :]
        else:
            text = text.rstrip() + "\n\n## Measured: arena and batch split\n\n" + section + "\n"
        DOC.write_text(text)


if __name__ == "__main__":
    main()
