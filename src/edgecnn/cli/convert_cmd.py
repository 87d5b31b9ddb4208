"""`edgecnn convert`: any model edgecnn reads -> its native .ecnn file (or seed 003's .bin)."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from edgecnn.cli.console import console, human_bytes
from edgecnn.cli.protect_options import ENCRYPT_OPTION, SIGN_OPTION, protection

NAME = "convert"


def command(
    source: Path = typer.Argument(..., help="Model file (.onnx, .prototxt, .cfg, .bin, .ecnn)."),
    output: Path = typer.Option(
        ..., "--output", "-o", help="File to write: .ecnn, or .bin for seed 003's format."
    ),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights)."),
    key: Path | None = typer.Option(
        None, "--key", metavar="KEYFILE", help="Model key of an encrypted .ecnn SOURCE."
    ),
    encrypt: Path | None = ENCRYPT_OPTION,
    sign: Path | None = SIGN_OPTION,
) -> None:
    """Convert SOURCE to edgecnn's native .ecnn file (memory-mapped, checksummed, loads in milliseconds)."""
    import edgecnn

    radar = output.suffix.lower() == ".bin"
    if radar and (encrypt is not None or sign is not None):
        raise typer.BadParameter(
            "only .ecnn outputs can be encrypted or signed", param_hint="--encrypt/--sign"
        )
    started = time.perf_counter()
    model = edgecnn.load(source, weights, threads=1, key=key)
    if radar:
        from edgecnn.importers.radar import save_radar

        save_radar(model.graph, output)
    else:
        model.save(output, **protection(encrypt, sign))
    elapsed = time.perf_counter() - started
    tensors = len(model.graph.initializers)
    console.print(
        f"wrote {output} ({human_bytes(output.stat().st_size)}, {len(model.graph.nodes)} nodes, "
        f"{tensors} tensors) in {elapsed:.2f} s"
    )
