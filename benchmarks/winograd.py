"""Winograd F(2x2,3x3) and F(4x4,3x3) against im2col + GEMM on the 3x3 stride-1 layers of VGG-16
and ResNet (plus small layers that locate the crossover), and the rounding error of each tile size.

Writes two tables into docs/tuning.md (between the ``<!-- winograd:... -->`` markers): the time
of every candidate per layer with the heuristic's pick (edgecnn.kernels.cpu.conv.winograd.preferred_tile),
and the error of each algorithm against a float64 reference.

    .venv/bin/python benchmarks/winograd.py [--threads 2] [--repeats 5] [--batch 1] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import numpy as np
from revisions import import_source, source_at

import edgecnn.kernels.cpu.conv.winograd  # noqa: F401  (registers the Winograd kernels)
from edgecnn.bench.machine import cpu_model
from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu import cpu_threads
from edgecnn.kernels.registry import candidate_kernels
from edgecnn.kernels.tuning_measure import example_inputs, heuristic_choice
from edgecnn.ops.conv import ConvAttrs, conv
from edgecnn.ops.fused import FusedConvAttrs

DOC = Path(__file__).resolve().parent.parent / "docs" / "tuning.md"

LAYERS = [  # (label, in channels, out channels, height = width)
    ("VGG conv1_2", 64, 64, 224),
    ("VGG conv2_2", 128, 128, 112),
    ("VGG conv3_2", 256, 256, 56),
    ("VGG conv4_2", 512, 512, 28),
    ("VGG conv5_2", 512, 512, 14),
    ("ResNet conv2_x", 64, 64, 56),
    ("ResNet conv3_x", 128, 128, 28),
    ("ResNet conv4_x", 256, 256, 14),
    ("ResNet conv5_x", 512, 512, 7),
    ("SqueezeNet fire2 expand3x3", 16, 64, 55),
    ("SqueezeNet fire4 expand3x3", 32, 128, 27),
    ("SqueezeNet fire6 expand3x3", 48, 192, 13),
    ("SqueezeNet fire8 expand3x3", 64, 256, 13),
    ("tiny-YOLO conv3", 32, 64, 112),
    ("tiny-YOLO conv4", 64, 128, 56),
    ("tiny-YOLO conv5", 128, 256, 28),
    ("tiny-YOLO conv6", 256, 512, 14),
    ("tiny-YOLO conv8", 1024, 1024, 7),
    ("GoogLeNet conv2 3x3", 64, 192, 56),
    ("GoogLeNet 3a 3x3", 96, 128, 28),
    ("GoogLeNet 3b 3x3", 128, 192, 28),
    ("GoogLeNet 4a 3x3", 96, 208, 14),
    ("GoogLeNet 4d 3x3", 144, 288, 14),
    ("GoogLeNet 5b 3x3", 192, 384, 7),
    ("small 32->32", 32, 32, 28),
    ("small 16->32", 16, 32, 56),
    ("small 16->16", 16, 16, 28),
    ("narrow 64->24", 64, 24, 40),
    ("thin 8->64", 8, 64, 56),
    ("tiny map 128->128", 128, 128, 4),
    ("whole-page planes 128->128", 128, 128, 32),
    ("whole-page planes 256->256", 256, 256, 32),
    ("whole-page planes 128->128 @ 64", 128, 128, 64),
    ("first layer 3->64", 3, 64, 112),
]


def conv_layer(
    c: int, m: int, size: int, batch: int
) -> tuple[Node, list[TensorType], list[np.ndarray | None]]:
    """A FusedConv 3x3, pad 1, with bias and ReLU, seeded weights."""
    rng = np.random.default_rng(c * 1000 + m)
    w = rng.standard_normal((m, c, 3, 3), dtype=np.float32) / np.float32(np.sqrt(9 * c))
    b = rng.standard_normal(m, dtype=np.float32)
    node = Node("FusedConv", "conv", ["x", "w", "b"], ["y"], FusedConvAttrs(pads=(1,) * 4, activation="relu"))
    types = [
        TensorType("float32", (batch, c, size, size)),
        TensorType("float32", w.shape),
        TensorType("float32", b.shape),
    ]
    return node, types, [None, w, b]


def interleaved_times(node: Node, types: list[TensorType], values: list, repeats: int) -> dict[str, float]:
    """Best-of-``repeats`` ms per candidate, the candidates' calls interleaved so that a burst of
    load from other processes hits all of them alike; one untimed warm-up call each."""
    inputs = example_inputs(types, values)
    runs = {e.name: e.factory(node, types, values) for e in candidate_kernels(node, types, values)}
    best = {name: float("inf") for name in runs}
    for run in runs.values():
        run(*inputs)
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run(*inputs)
            best[name] = min(best[name], (time.perf_counter() - start) * 1e3)
    return best


def time_table(threads: int, repeats: int, batch: int) -> list[str]:
    lines = [
        "| layer | C->M @ HxW | im2col_gemm ms | winograd_f23 ms | winograd_f43 ms | fastest | heuristic | heuristic / fastest |",
        "|---|---|---:|---:|---:|---|---|---:|",
    ]
    with cpu_threads(threads):
        for label, c, m, size in LAYERS:
            node, types, values = conv_layer(c, m, size, batch)
            times = interleaved_times(node, types, values, repeats)
            entries = candidate_kernels(node, types, values)
            fastest = min(times, key=times.__getitem__)
            pick = heuristic_choice(entries, node, types, values)
            cells = [
                f"{times[k]:.2f}" if k in times else "-"
                for k in ("im2col_gemm", "winograd_f23", "winograd_f43")
            ]
            row = f"| {label} | {c}->{m} @ {size}x{size} | {' | '.join(cells)} | {fastest} | {pick} | {times[pick] / times[fastest]:.2f} |"
            print(row, flush=True)
            lines.append(row)
    return lines


def error_table(trials: int) -> list[str]:
    """Max |y - y64| / max(|x| * |w| summed) over random layers, per algorithm: the error relative to
    the size of the terms summed, which is what float32 rounding scales with."""
    from edgecnn.kernels.cpu.conv.steps import TiledConvGemm
    from edgecnn.kernels.cpu.conv.winograd import WinogradConv

    algorithms = {
        "im2col_gemm": TiledConvGemm,
        "winograd_f23": lambda n, t, v: WinogradConv(n, t, v, 2),
        "winograd_f43": lambda n, t, v: WinogradConv(n, t, v, 4),
    }
    worst = {name: 0.0 for name in algorithms}
    mean = {name: 0.0 for name in algorithms}
    rng = np.random.default_rng(1)
    plain = ConvAttrs(pads=(1,) * 4)
    for _ in range(trials):
        c, m, size = int(rng.integers(1, 257)), int(rng.integers(1, 65)), int(rng.integers(3, 30))
        x = rng.standard_normal((1, c, size, size), dtype=np.float32)
        w = rng.standard_normal((m, c, 3, 3), dtype=np.float32)
        node = Node("Conv", "conv", ["x", "w"], ["y"], plain)
        types = [TensorType("float32", x.shape), TensorType("float32", w.shape)]
        exact = conv(plain, x.astype(np.float64), w.astype(np.float64))
        scale = conv(plain, np.abs(x).astype(np.float64), np.abs(w).astype(np.float64)).max()
        with cpu_threads(1):
            for name, make in algorithms.items():
                error = float(np.abs(make(node, types, [None, w])(x) - exact).max() / scale)
                worst[name] = max(worst[name], error)
                mean[name] += error / trials
    lines = ["| algorithm | mean relative error | worst relative error |", "|---|---:|---:|"]
    for name in algorithms:
        lines.append(f"| {name} | {mean[name]:.2e} | {worst[name]:.2e} |")
    return lines


def chunk_sweep(threads: int, repeats: int, batch: int) -> None:
    """Print the Winograd kernels' time per layer for several chunk sizes (CHUNK_BYTES, MAX_TILES):
    the measurement behind those two constants."""
    from unittest import mock

    from edgecnn.kernels.cpu.conv import winograd

    settings = [(1 << 20, 256), (1 << 21, 512), (1 << 22, 1024), (1 << 23, 512), (1 << 23, 1024)]
    print("| layer | tile | " + " | ".join(f"{b >> 10} KiB / {t}" for b, t in settings) + " |")
    with cpu_threads(threads):
        for label, c, m, size in LAYERS:
            node, types, values = conv_layer(c, m, size, batch)
            x = example_inputs(types, values)[0]
            if winograd.winograd_setup(node, types, values) is None:
                continue
            for tile in (2, 4):
                cells = []
                for chunk_bytes, max_tiles in settings:
                    with mock.patch.multiple(winograd, CHUNK_BYTES=chunk_bytes, MAX_TILES=max_tiles):
                        run = winograd.WinogradConv(node, types, values, tile)
                        run(x)
                        best = float("inf")
                        for _ in range(repeats):
                            start = time.perf_counter()
                            run(x)
                            best = min(best, time.perf_counter() - start)
                    cells.append(f"{best * 1e3:.2f}")
                print(f"| {label} | {tile} | " + " | ".join(cells) + " |", flush=True)


def model_table(names: list[str], threads: int, batch: int, repeats: int, batch_parallel: str) -> list[str]:
    """Whole-model latency (median of ``repeats`` interleaved runs) with the Winograd kernels where
    the heuristic picks them, and with them disabled (``preferred_tile`` forced to 0)."""
    import statistics
    from unittest import mock

    import edgecnn
    from edgecnn.bench.zoo import default_cache_dir, model_path, zoo_entry
    from edgecnn.kernels.cpu.conv import winograd
    from edgecnn.model import Model
    from edgecnn.runtime.feeds import random_feeds
    from edgecnn.runtime.options import RuntimeOptions

    options = RuntimeOptions.resolve(threads=threads, batch_parallel=batch_parallel)

    lines = [
        "| model | Winograd layers | im2col only ms | with Winograd ms | speed-up |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in names:
        graph = edgecnn.load(model_path(name, default_cache_dir()), threads=threads).graph
        with_winograd = Model(graph, options)
        feeds = random_feeds(with_winograd.inputs, batch=None if zoo_entry(name).fixed_batch else batch)
        layers = sum(s.kernel.name.startswith("winograd") for s in with_winograd.plan_for(feeds).steps)
        with mock.patch.object(winograd, "preferred_tile", lambda setup: 0):
            without = Model(graph, options)
            without.plan_for(feeds)
        times: dict[str, list[float]] = {"without": [], "with": []}
        for _ in range(repeats + 1):  # the first round warms up
            for label, net in (("without", without), ("with", with_winograd)):
                start = time.perf_counter()
                net.run(feeds)
                times[label].append((time.perf_counter() - start) * 1e3)
        a, b = (statistics.median(times[k][1:]) for k in ("without", "with"))
        row = f"| {name} | {layers} | {a:.1f} | {b:.1f} | {a / b:.2f}x |"
        print(row, flush=True)
        lines.append(row)
    return lines


def revision_module(revision: str) -> ModuleType:
    """winograd.py and winograd_transforms.py as they were at ``revision``, imported as modules of
    their own (the Winograd kernel of that tree, registered nowhere), for in-process A/B timing."""
    folder = Path(tempfile.gettempdir()) / "edgecnn-revisions"
    transforms = f"winograd_transforms_{revision}"

    def own_names(text: str) -> str:
        text = text.replace("edgecnn.kernels.cpu.conv.winograd_transforms", transforms)
        return text.split("\nfor _op in (", 1)[0]  # leave the registry alone

    import_source(
        transforms,
        source_at(revision, "src/edgecnn/kernels/cpu/conv/winograd_transforms.py", own_names),
        folder,
    )
    return import_source(
        f"winograd_{revision}",
        source_at(revision, "src/edgecnn/kernels/cpu/conv/winograd.py", own_names),
        folder,
    )


def against_table(revision: str, threads: int, repeats: int, mark: str = "against") -> list[str]:
    """This tree's WinogradConv against ``revision``'s on the Winograd layers of LAYERS: medians of
    ``repeats`` interleaved calls (order turned every call), outputs checked equal."""
    from edgecnn.kernels.cpu.conv.setup import conv_setup
    from edgecnn.kernels.cpu.conv.winograd import WinogradConv, preferred_tile

    old = revision_module(revision)
    rows = []
    for label, c, m, size in LAYERS:
        node, types, values = conv_layer(c, m, size, 1)
        setup = conv_setup(node, types)
        tile = preferred_tile(setup)
        if not tile:
            continue
        x = example_inputs(types, values)[0]
        kernels = {
            "before": old.WinogradConv(node, types, values, tile),
            "after": WinogradConv(node, types, values, tile),
        }
        outs = {k: np.empty(kernel.out_shape, np.float32) for k, kernel in kernels.items()}
        times: dict[str, list[float]] = {k: [] for k in kernels}
        with cpu_threads(threads):
            for k, kernel in kernels.items():
                kernel.run_into(outs[k], x)
            np.testing.assert_allclose(outs["after"], outs["before"], rtol=1e-3, atol=1e-3)
            for call in range(repeats):
                for k in list(kernels) if call % 2 else list(kernels)[::-1]:
                    start = time.perf_counter()
                    kernels[k].run_into(outs[k], x)
                    times[k].append((time.perf_counter() - start) * 1e3)
        before, after = (float(np.median(times[k])) for k in ("before", "after"))
        rows.append(
            f"| {label} | {c}->{m} @ {size}x{size} | F({tile}x{tile}) | {before:.3f} | {after:.3f} | {after / before:.2f} |"
        )
    return [
        f"Machine: {cpu_model()}, {os.cpu_count()} logical CPUs; load average {os.getloadavg()[0]:.2f}; "
        f"batch 1, {threads} thread(s). Command: `.venv/bin/python benchmarks/winograd.py --against {revision} "
        f"--threads {threads} --repeats {repeats} --mark {mark}`",
        "",
        f"| layer | C->M @ HxW | tile | {revision} ms | this tree ms | ratio |",
        "|---|---|---|---:|---:|---:|",
        *rows,
    ]


def replace_between(text: str, marker: str, body: list[str]) -> str:
    start, end = f"<!-- winograd:{marker}:start -->", f"<!-- winograd:{marker}:end -->"
    block = "\n".join([start, *body, end])
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        print(f"{DOC} has no {start} ... {end} markers: that table is printed only", file=sys.stderr)
        return text
    return pattern.sub(lambda _: block, text)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per kernel (the best counts)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument(
        "--trials", type=int, default=40, help="random layers for the error table (0 skips it)"
    )
    parser.add_argument("--no-layers", action="store_true", help="skip the per-layer timing table")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/tuning.md alone")
    parser.add_argument(
        "--models",
        default="resnet18,vgg16",
        help="zoo models timed whole, with and without Winograd ('' skips)",
    )
    parser.add_argument(
        "--batch-parallel",
        default="auto",
        choices=["auto", "never", "always"],
        help="whole models' batch split",
    )
    parser.add_argument("--chunk-sweep", action="store_true", help="only print the chunk size sweep")
    parser.add_argument("--against", metavar="REV", help="only time this tree's Winograd against REV's")
    parser.add_argument(
        "--mark", default="against", help="--against's table goes between winograd:MARK markers"
    )
    args = parser.parse_args()
    if args.against:
        lines = against_table(args.against, args.threads, args.repeats, args.mark)
        print("\n".join(lines))
        if not args.no_write:
            DOC.write_text(
                replace_between(DOC.read_text(encoding="utf-8"), args.mark, lines), encoding="utf-8"
            )
        return
    if args.chunk_sweep:
        chunk_sweep(args.threads, args.repeats, args.batch)
        return
    os.environ["EDGECNN_CACHE_DIR"] = tempfile.mkdtemp(prefix="edgecnn-no-tuning-")  # heuristics only
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    header = [
        f"Machine: {cpu_model()}, {os.cpu_count()} logical CPUs; load average before the run: {load}.",
        f"Batch {args.batch}, {args.threads} thread(s), FusedConv 3x3 pad 1 + bias + ReLU, best of "
        f"{args.repeats} interleaved calls after a warm-up call. Command: `.venv/bin/python benchmarks/winograd.py "
        f"--threads {args.threads} --repeats {args.repeats} --batch {args.batch}`",
        "",
    ]
    timings = [] if args.no_layers else header + time_table(args.threads, args.repeats, args.batch)
    print(f"load average after: {os.getloadavg()}")
    errors = []
    if args.trials:
        errors = [f"{args.trials} random layers (C 1..256, M 1..64, 3..29 pixels square, pad 1), seed 1.", ""]
        errors += error_table(args.trials)
        print("\n".join(errors))
    models = [m for m in args.models.split(",") if m]
    model_lines = [
        header[0],
        f"Batch {args.batch}, {args.threads} thread(s), batch_parallel={args.batch_parallel!r}, median of "
        f"{args.repeats} interleaved runs after one warm-up run; the baseline is the same plan with the "
        "Winograd heuristic switched off.",
        "",
    ]
    model_lines += (
        model_table(models, args.threads, args.batch, args.repeats, args.batch_parallel) if models else []
    )
    if not args.no_write:
        text = DOC.read_text(encoding="utf-8")
        if timings:
            text = replace_between(text, f"times-{args.threads}t-b{args.batch}", timings)
        if models:
            policy = "" if args.batch_parallel == "auto" else f"-{args.batch_parallel}"
            text = replace_between(text, f"models-{args.threads}t-b{args.batch}{policy}", model_lines)
        if errors:
            text = replace_between(text, "errors", errors)
        DOC.write_text(text, encoding="utf-8")
        print(f"wrote {DOC}", file=sys.stderr)


if __name__ == "__main__":
    main()
