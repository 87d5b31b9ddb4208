"""`edgecnn tune`: time every kernel that can run each layer, cache the fastest for this machine."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.progress import TextColumn, TimeRemainingColumn
from rich.table import Table

from edgecnn.cli.console import console, headline, measuring_progress, step
from edgecnn.kernels.tuning_measure import LayerTiming, time_layers, tunable_layers
from edgecnn.runtime.feeds import random_feeds
from edgecnn.runtime.plan import Plan
from edgecnn.vision.preprocess import parse_shape

NAME = "tune"


def plan_layers(plan: Plan) -> list[tuple]:
    """(node, input types, constant input values) of every step, as kernel selection saw them."""
    return [
        (
            step.node,
            [plan.types.get(x) if x else None for x in step.node.inputs],
            [plan.constants.get(x) if x else None for x in step.node.inputs],
        )
        for step in plan.steps
    ]


def command(
    model: Path = typer.Argument(..., help="Model file (.onnx, .prototxt, .cfg, .ecnn)."),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights)."),
    batch: int | None = typer.Option(None, min=1, help="Batch size (default: the model's, else 1)."),
    shape: str | None = typer.Option(None, help="Input shape for symbolic dimensions, e.g. 1x3x224x224."),
    threads: int | None = typer.Option(None, min=1, help="Threads (default: all cores)."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """Time each kernel that can run each layer of MODEL (once, after a warm-up call) and cache the
    fastest per layer for this machine; later loads with the same shapes and threads use it."""
    import edgecnn
    from edgecnn.kernels.tuning import cache_path, machine_description, store_choices

    net = edgecnn.load(model, weights, threads=threads, device="cpu")
    shapes = {net.inputs[0].name: parse_shape(shape)} if shape and net.inputs else None
    feeds = random_feeds(net.inputs, batch=batch, shapes=shapes, budget=net.options.budget)
    layers = plan_layers(net.plan_for(feeds))
    tunable = tunable_layers(layers)
    with measuring_progress(TextColumn("tuning"), TimeRemainingColumn(), disable=as_json) as progress:
        task = progress.add_task("tuning", total=len(tunable))
        advance = step(progress, task)
        timings = time_layers([layers[i] for i in tunable], net.options.threads, on_layer=lambda _: advance())
    path = store_choices({t.key: t.choice() for t in timings}) if timings else cache_path()
    if as_json:
        document = {
            "model": str(model),
            "inputs": {name: list(array.shape) for name, array in feeds.items()},
            "threads": net.options.threads,
            "machine": machine_description(),
            "cache": str(path),
            "layers": [
                {
                    "layer": t.layer,
                    "op": t.op,
                    "times_ms": dict(t.times_ms),
                    "winner": t.winner,
                    "heuristic": t.default,
                    "speedup": t.speedup,
                }
                for t in timings
            ],
        }
        print(json.dumps(document, indent=2))
        return
    shapes_text = ", ".join(f"{n} {list(a.shape)}" for n, a in feeds.items())
    console.print(
        headline(model, f": {shapes_text}; {net.options.threads} thread(s); {machine_description()}")
    )
    print_table(timings)
    console.print(
        f"{len(timings)} of {len(layers)} layer(s) had more than one kernel; "
        f"{sum(t.winner != t.default for t in timings)} now differ from the heuristic. Cache: {path}"
    )


def print_table(timings: list[LayerTiming]) -> None:
    """Layer, each candidate's time, the winner, and its speed-up over the heuristic's choice."""
    table = Table(box=None, header_style="bold")
    for column in ("layer", "op", "candidates (ms)", "winner", "speed-up"):
        table.add_column(column, justify="right" if column == "speed-up" else "left")
    for t in timings:
        candidates = "  ".join(
            f"{name} {ms:.3f}" for name, ms in sorted(t.times_ms.items(), key=lambda kv: kv[1])
        )
        table.add_row(t.layer, t.op, candidates, t.winner, f"{t.speedup:.2f}x")
    console.print(table)
