"""Thread grain of the GEMM-based conv kernels: below which layer size one thread beats two (issue 4).

For every conv layer of the given zoo models (batch 1) the layer's chosen kernel
(``edgecnn.kernels.tuning_measure.heuristic_choice``) is timed on one and on two threads, interleaved
in one process (one call of each per round, medians), in bench-like conditions: ``cpu_threads(n)``
around each call and ``OMP_WAIT_POLICY=PASSIVE`` (what ``edgecnn bench`` sets; threads.py sets it
on import when unset). The kernel's own grain switch is overridden for the two-thread timing, so
the table shows what two threads would do for every layer. It also gives each layer's tiling (tasks
per worker) and the speedup, and the size (multiply-adds) where two threads start to win, which is
what ``threads.GEMM_GRAIN`` should be. The table goes between its markers in docs/tuning.md.

    .venv/bin/python benchmarks/grain.py --models squeezenet1.1,resnet50 --rounds 25

``--whole MODELS`` instead compares whole runs in one process, alternating: each model loaded twice,
one copy planned under the previous grains (``--old-grain`` for the GEMM-based conv kernels,
``--old-loop-grain`` for the compiled loops that use ``threads.is_small``: depthwise, pooling, LRN)
and one under the current ones (``threads.CONV_GEMM_GRAIN``, ``threads.GRAIN``), with onnxruntime
beside them.
Each conv kernel fixes its grain when it is built, so the two copies keep their rules.

    .venv/bin/python benchmarks/grain.py --whole squeezenet1.1,resnet18,resnet50 --whole-rounds 30
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import numpy as np
import onnx
from rule_ab import table
from sections import replace_section

import edgecnn
from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model
from edgecnn.ir.graph import Node
from edgecnn.kernels.cpu import cpu_threads
from edgecnn.kernels.cpu.conv import steps as conv_kernels
from edgecnn.kernels.cpu.conv import winograd as wino
from edgecnn.kernels.cpu.conv.residual import conv_part
from edgecnn.kernels.cpu.conv.setup import conv_setup
from edgecnn.kernels.cpu.system import threads as thread_budget
from edgecnn.kernels.registry import candidate_kernels
from edgecnn.kernels.tuning_measure import example_inputs, heuristic_choice

MARK = "tuning:thread-grain"


@dataclass
class Row:
    model: str
    name: str
    shape: str
    kernel: str
    macs: int
    one_ms: float
    two_ms: float
    one_min: float
    two_min: float
    tiling: str
    parallel: float  # median CPU / wall time of the two-thread calls

    @property
    def speedup(self) -> float:
        return self.one_ms / self.two_ms

    @property
    def speedup_min(self) -> float:
        return self.one_min / self.two_min


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def interleaved(timers: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[tuple[float, float]]]:
    """Each timer's (wall ms, process CPU ms) samples, one call of each per round, after two warm-up
    calls each. CPU time counts both threads: a two-thread call whose CPU time is close to its wall
    time ran its threads one after the other (the second waited for a core)."""
    for _ in range(2):
        for fn in timers.values():
            fn()
    samples: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for round_ in range(rounds):
        # the order turns every round: a call right after a two-thread call finds the second
        # worker awake, one after a one-thread call does not (a bias of ~5% on 1 ms layers)
        names = list(timers)
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            fn = timers[name]
            cpu, wall = time.process_time(), time.perf_counter()
            fn()
            samples[name].append(((time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3))
    return samples


def conv_steps(model: onnx.ModelProto) -> list[tuple[Node, list, list, str]]:
    """(node, input types, constants, chosen kernel name) of each conv step of the planned model."""
    value = model.graph.input[0]
    shape = [d.dim_value or 1 for d in value.type.tensor_type.shape.dim]
    x = np.zeros(shape, dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.onnx"
        onnx.save(model, str(path))
        net = edgecnn.load(str(path), threads=2)
    plan = net.plan_for(x)
    layers = []
    for step in plan.steps:
        node = step.node
        if node.op not in ("Conv", "FusedConv", "FusedConvAdd"):
            continue
        types = [plan.types.get(i) if i else None for i in node.inputs]
        values = [plan.constants.get(i) if i else None for i in node.inputs]
        if node.op == "FusedConvAdd":  # the residual tail: its convolution alone
            inner, types, values = conv_part(node, types, values)
            node = Node(inner.op, node.name, inner.inputs, inner.outputs, inner.attrs)
        entries = candidate_kernels(node, types, values)
        layers.append((node, types, values, heuristic_choice(entries, node, types, values)))
    return layers


def _tiling_text(kernel: object, threads: int) -> str:
    if isinstance(kernel, conv_kernels.TiledConvGemm):
        t = kernel.tiles(threads)
        return f"{t.tasks} tiles {t.row_step}x{t.column_step}"
    chunking = getattr(kernel, "chunking", None)
    if callable(chunking):
        step, oc_step, workers = chunking(threads)
        return f"wino chunk {step}, oc {oc_step}, {workers} w"
    return "-"


def runner(kernel: object, threads: int, out: np.ndarray, inputs: list[np.ndarray]) -> Callable[[], None]:
    """One call of a prepared kernel under a ``threads`` budget, as a run makes it."""

    def run() -> None:
        with cpu_threads(threads):
            kernel.run_into(out, *inputs)  # type: ignore[attr-defined]

    return run


def measure(model_name: str, rounds: int) -> list[Row]:
    rows = []
    for node, types, values, chosen in conv_steps(build_model(model_name)):
        s = conv_setup(node, types)
        assert s is not None
        entry = next(e for e in candidate_kernels(node, types, values) if e.name == chosen)
        inputs = example_inputs(types, values)
        one, two = entry.factory(node, types, values), entry.factory(node, types, values)
        if hasattr(two, "small"):
            two.small = False  # what two threads would do, whatever the current grain says
        out = np.empty((s.batch, s.out_channels, *s.out), dtype=np.float32)

        timers = {"1": runner(one, 1, out, inputs), "2": runner(two, 2, out, inputs)}
        tiling = _tiling_text(two, 2)
        if isinstance(two, conv_kernels.TiledConvGemm) and conv_kernels.prefer_rows(
            s.out_channels // s.group, s.out[0] * s.out[1], im2col=not s.pointwise
        ):  # the channel cut against the pixel cut (tiling.prefer_rows)
            by_pixels = entry.factory(node, types, values)
            by_pixels.small = False
            with mock.patch.object(conv_kernels, "prefer_rows", lambda *_, **__: False):
                tiling_p = _tiling_text(by_pixels, 2)  # fixed on first use
            timers["2p"] = runner(by_pixels, 2, out, inputs)
        chunking = getattr(two, "chunking", None)
        split_label = ""
        if callable(chunking) and -(-two.tiles // 2) < 4 * wino.MIN_SPLIT_TILES:
            # Winograd on a small map: the threads' split (tiles or output channels, by
            # winograd.MIN_SPLIT_TILES) against the other one, in the same rounds
            other = entry.factory(node, types, values)
            other.small = False
            if chunking(2)[1] < s.out_channels:
                split_label = "tiles split"
                other._chunking[2] = (-(-two.tiles // 2), s.out_channels, 2)
            else:
                split_label = "channels split"
                other._chunking[2] = (two.tiles, -(-s.out_channels // 2), 2)
            timers["2s"] = runner(other, 2, out, inputs)
        samples = interleaved(timers, rounds)
        times = {k: float(np.median([w for w, _ in v])) for k, v in samples.items()}
        lows = {k: float(np.min([w for w, _ in v])) for k, v in samples.items()}
        parallel = float(np.median([c / w for w, c in samples["2"]]))
        macs = (
            s.batch
            * s.out_channels
            * s.out[0]
            * s.out[1]
            * (s.in_channels // s.group)
            * s.kernel[0]
            * s.kernel[1]
        )
        shape = f"{s.in_channels}->{s.out_channels} {s.kernel[0]}x{s.kernel[1]}/{s.strides[0]} @{s.out[0]}x{s.out[1]}"
        if "2p" in times:
            tiling += f"; by pixels ({tiling_p}): {times['2p']:.3f} ms"
        if "2s" in times:
            tiling += f"; {split_label}: {times['2s']:.3f} ms"
        r = Row(
            model_name,
            node.name,
            shape,
            chosen,
            macs,
            times["1"],
            times["2"],
            lows["1"],
            lows["2"],
            tiling,
            parallel,
        )
        rows.append(r)
        print(
            f"{model_name} {r.name} {r.shape} {r.kernel} {r.macs} {r.one_ms:.3f} {r.two_ms:.3f} {r.speedup:.2f} "
            f"min {r.speedup_min:.2f} cpu/wall {r.parallel:.2f} {r.tiling}",
            flush=True,
        )
    return rows


def crossover(rows: list[Row], fastest: bool = False) -> int:
    """The grain that misassigns the fewest milliseconds (medians, or the fastest runs): layers
    below it run on one thread."""
    candidates = sorted({r.macs for r in rows} | {0})

    def lost(grain: int) -> float:
        total = 0.0
        for r in rows:
            one, two = (r.one_min, r.two_min) if fastest else (r.one_ms, r.two_ms)
            total += max(one - two, 0) if r.macs < grain else max(two - one, 0)
        return total

    return min(candidates, key=lambda g: (lost(g), g))


def section(rows: list[Row], models: list[str], rounds: int, load: tuple[float, float, float]) -> list[str]:
    lines = [
        "## Thread grain",
        "",
        "Each conv layer's chosen kernel on one thread and on two (its grain switch overridden), batch 1,",
        f"{rounds} interleaved rounds, `OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}`.",
        "Speedup = 1-thread / 2-thread time, from the medians and from the fastest run of each",
        "(the fastest runs are those where no other process held the second core); below 1.0 the second",
        'thread costs more than it brings. "2t CPU/wall" = the two-thread calls\' process CPU time over',
        "their wall time (median): near 1.0 the two workers ran one after the other (the second waited",
        "for a core another process held) and the row says little about two free cores. For 1x1 layers",
        "cut by output channels (`tiling.prefer_rows`) the tiling column also gives the two-thread median",
        "with the pixel cut the rule replaced, timed in the same rounds; for Winograd layers on small maps,",
        "the median with the other split between the threads (tiles or output channels).",
        f"Current `CONV_GEMM_GRAIN` = {thread_budget.CONV_GEMM_GRAIN:,} multiply-adds. The grain that misassigns the fewest",
        f"milliseconds over these layers: **{crossover(rows):,}** by the medians, "
        f"**{crossover(rows, fastest=True):,}** by the fastest runs.",
        "",
        f"Machine: {cpu_model()}, {os.cpu_count()} cores, load average {load[0]:.2f} / {load[1]:.2f} at start,",
        f"{os.getloadavg()[0]:.2f} at the end (shared machine if above ~0.5).",
        "",
        f"Command: `.venv/bin/python benchmarks/grain.py --models {','.join(models)} --rounds {rounds}`",
        "",
        "| model | layer | shape | kernel | MACs | 1 thread ms | 2 threads ms | speedup | fastest: speedup "
        "| 2t CPU/wall | 2-thread tiling |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in sorted(rows, key=lambda r: r.macs):
        lines.append(
            f"| {r.model} | {r.name} | {r.shape} | {r.kernel} | {r.macs:,} | {r.one_ms:.3f} | {r.two_ms:.3f} | "
            f"{r.speedup:.2f} | {r.speedup_min:.2f} | {r.parallel:.2f} | {r.tiling} |"
        )
    return lines


def whole_section(models: list[str], rounds: int, old_grain: int, old_loop_grain: int) -> list[str]:
    """Whole models planned under the old grains and the current ones, in one process (rule_ab.py)."""
    settings = [
        ("edgecnn.kernels.cpu.system.threads", "CONV_GEMM_GRAIN", old_grain),
        ("edgecnn.kernels.cpu.system.threads", "GRAIN", old_loop_grain),
    ]
    command = (
        f".venv/bin/python benchmarks/grain.py --whole {','.join(models)} --whole-rounds {rounds} "
        f"--old-grain {old_grain} --old-loop-grain {old_loop_grain}"
    )
    return [
        "### Whole models: previous grains against the current ones",
        "",
        *table(models, 2, rounds, settings, command),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="squeezenet1.1,resnet50")
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--whole", default="", help="models to compare whole, old rules vs new (comma list)")
    parser.add_argument("--whole-rounds", type=int, default=30)
    parser.add_argument(
        "--old-grain", type=int, default=1 << 22, help="the conv grain before this measurement"
    )
    parser.add_argument(
        "--old-loop-grain", type=int, default=200_000, help="threads.GRAIN before this measurement"
    )
    parser.add_argument("--output", type=Path, default=Path(__file__).parent.parent / "docs" / "tuning.md")
    args = parser.parse_args()
    text = args.output.read_text(encoding="utf-8") if args.output.exists() else "# Tuning\n"
    if args.whole:
        models = args.whole.split(",")
        body = whole_section(models, args.whole_rounds, args.old_grain, args.old_loop_grain)
        text = replace_section(text, f"{MARK}-whole", body)
    else:
        load = os.getloadavg()
        models = [m for m in args.models.split(",") if m]
        rows = [row for m in models for row in measure(m, args.rounds)]
        text = replace_section(text, MARK, section(rows, models, args.rounds, load))
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
