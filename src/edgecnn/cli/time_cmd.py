"""`edgecnn time`: the `caffe time` report — every iteration, every layer's share, the average."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.progress import TextColumn, TimeRemainingColumn
from rich.table import Table

from edgecnn.cli.console import console, headline, measuring_progress, sanitize, step
from edgecnn.model import Model
from edgecnn.profiling.layer_timer import Profile
from edgecnn.runtime.feeds import random_feeds
from edgecnn.vision.preprocess import parse_shape

NAME = "time"


def command(
    model: Path = typer.Argument(..., help="Model file (.onnx, .prototxt, .cfg, .ecnn)."),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights)."),
    iterations: int = typer.Option(50, min=1, help="Timed forward passes."),
    warmup: int = typer.Option(5, min=0, help="Untimed forward passes first."),
    batch: int | None = typer.Option(None, min=1, help="Batch size (default: the model's, else 1)."),
    shape: str | None = typer.Option(None, help="Input shape for symbolic dimensions, e.g. 1x3x224x224."),
    threads: int | None = typer.Option(None, min=1, help="Threads (default: all cores)."),
    device: str = typer.Option("cpu", help="cpu, opencl[:N] or reference (`edgecnn devices` lists them)."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    backward: bool = typer.Option(
        False, "--backward", help="Time training passes: forward, backward and forward-backward per layer."
    ),
) -> None:
    """Time MODEL's forward pass per layer on random input, like `caffe time` (--backward: training passes too)."""
    import edgecnn

    net = edgecnn.load(model, weights, threads=threads, device=device)
    shapes = {net.inputs[0].name: parse_shape(shape)} if shape and net.inputs else None
    feeds = random_feeds(net.inputs, batch=batch, shapes=shapes, budget=net.options.budget)
    if backward:
        time_backward(net, feeds, iterations, warmup, as_json, model)
        return
    profile = timed(net, feeds, iterations, warmup, show_progress=not as_json)
    if as_json:
        document = {
            "model": str(model),
            "inputs": {name: list(array.shape) for name, array in feeds.items()},
            "threads": net.options.threads,
            "warmup": warmup,
            **profile.to_dict(),
        }
        print(json.dumps(document, indent=2))
        return
    shapes_text = ", ".join(f"{n} {list(a.shape)}" for n, a in feeds.items())
    console.print(
        headline(
            model,
            f": {shapes_text}; {net.options.threads} thread(s); "
            f"{iterations} iteration(s) after {warmup} warm-up",
        )
    )
    print_report(profile)


def timed(net: Model, feeds: dict, iterations: int, warmup: int, show_progress: bool) -> Profile:
    """Model.profile with a progress bar on stderr (hidden once done)."""
    with measuring_progress(
        TextColumn("timing"), TimeRemainingColumn(), disable=not show_progress
    ) as progress:
        task = progress.add_task("timing", total=iterations + warmup)
        return net.profile(feeds, iterations, warmup, on_iteration=step(progress, task))


def print_report(profile: Profile) -> None:
    console.print("iteration times (ms): " + " ".join(f"{t:.3f}" for t in profile.iteration_ms))
    table = Table(box=None, header_style="bold")
    for column in ("layer", "op", "kernel", "avg ms", "min ms", "share"):
        table.add_column(column, justify="right" if "ms" in column or column == "share" else "left")
    for layer in profile.layers:
        table.add_row(
            sanitize(layer.name),
            sanitize(layer.op),
            layer.kernel,
            f"{layer.mean_ms:.3f}",
            f"{layer.min_ms:.3f}",
            f"{layer.share:.1%}",
        )
    console.print(table)
    console.print(
        f"average forward: {profile.mean_ms:.3f} ms (median {profile.median_ms:.3f}, "
        f"min {profile.min_ms:.3f}); total: {profile.total_ms:.1f} ms"
    )


def time_backward(net: Model, feeds: dict, iterations: int, warmup: int, as_json: bool, model: Path) -> None:
    """`caffe time` proper: per-layer forward and backward of training passes (numpy training code)."""
    from threadpoolctl import threadpool_limits

    from edgecnn.train.timing import profile_training

    if len(feeds) != 1:
        raise typer.BadParameter("--backward times single-input models")
    x = next(iter(feeds.values()))
    with (
        measuring_progress(
            TextColumn("timing forward-backward"), TimeRemainingColumn(), disable=as_json
        ) as progress,
        threadpool_limits(net.options.threads),
    ):
        task = progress.add_task("timing", total=iterations + warmup)
        profile = profile_training(net.graph, x, iterations, warmup, on_iteration=step(progress, task))
    if as_json:
        document = {
            "model": str(model),
            "input": list(x.shape),
            "threads": net.options.threads,
            "warmup": warmup,
        }
        print(json.dumps({**document, **profile.to_dict()}, indent=2))
        return
    console.print(
        headline(
            model,
            f": training passes on {list(x.shape)}; {net.options.threads} thread(s); "
            f"{iterations} iteration(s) after {warmup} warm-up; no weight update",
        )
    )
    table = Table(box=None, header_style="bold")
    for column in ("layer", "op", "forward ms", "backward ms", "forward-backward ms"):
        table.add_column(column, justify="right" if "ms" in column else "left")
    for layer in profile.layers:
        table.add_row(
            sanitize(layer.name),
            sanitize(layer.op),
            f"{layer.forward_ms:.3f}",
            f"{layer.backward_ms:.3f}",
            f"{layer.forward_ms + layer.backward_ms:.3f}",
        )
    console.print(table)
    console.print(
        f"average forward pass: {profile.mean_forward_ms:.3f} ms; backward pass: {profile.mean_backward_ms:.3f} ms; "
        f"forward-backward: {profile.mean_forward_backward_ms:.3f} ms"
    )
