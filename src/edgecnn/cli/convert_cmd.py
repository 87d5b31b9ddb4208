"""`edgecnn convert`: any model edgecnn reads -> its native .ecnn file (or seed 003's .bin)."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from edgecnn.cli.console import console, human_bytes

NAME = "convert"


def command(
    source: Path = typer.Argument(..., help="Model file (.onnx, .prototxt, .cfg, .bin, .ecnn)."),
    output: Path = typer.Option(
        ..., "--output", "-o", help="File to write: .ecnn, or .bin for seed 003's format."
    ),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights)."),
) -> None:
    """Convert SOURCE to edgecnn's native .ecnn file (memory-mapped, checksummed, loads in milliseconds)."""
    import edgecnn

    started = time.perf_counter()
    model = edgecnn.load(source, weights, threads=1)
    if output.suffix.lower() == ".bin":
        from edgecnn.importers.radar import save_radar

        save_radar(model.graph, output)
    else:
        model.save(output)
    elapsed = time.perf_counter() - started
    tensors = len(model.graph.initializers)
    console.print(
        f"wrote {output} ({human_bytes(output.stat().st_size)}, {len(model.graph.nodes)} nodes, "
        f"{tensors} tensors) in {elapsed:.2f} s"
    )
