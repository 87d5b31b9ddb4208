"""`edgecnn compare`: run a model on edgecnn and on another engine, layer by layer, and show which
layer diverges first."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import typer
from rich.progress import TextColumn
from rich.table import Table

from edgecnn.cli.console import console, headline, measuring_progress, step
from edgecnn.compare import PEERS, Comparison, Tolerance, compare_layers
from edgecnn.errors import InputError
from edgecnn.vision.preprocess import parse_shape

NAME = "compare"
STAGES = 5
"""compare_layers' stages: load edgecnn, load the peer, run edgecnn, run the peer, run it again."""


def command(
    model: Path = typer.Argument(..., help="Model file (.onnx, .prototxt, .cfg, .ecnn, .tflite)."),
    against: str = typer.Option(..., "--against", help=f"The other engine: {', '.join(PEERS)}."),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights)."),
    peer_model: Path | None = typer.Option(
        None, help="The file the other engine runs (default: MODEL), e.g. the ONNX an .ecnn came from."
    ),
    peer_weights: Path | None = typer.Option(
        None, help="The other engine's weights file (default: --weights)."
    ),
    inputs: list[str] = typer.Option(
        [], "--input", help="An input array: FILE.npy (one-input models) or NAME=FILE.npy; default random."
    ),
    shape: str | None = typer.Option(
        None, help="Shape of the random input, e.g. 1x3x224x224 (one-input models)."
    ),
    optimize: bool = typer.Option(
        True, "--optimize/--no-optimize", help="Run edgecnn's optimised graph, or the graph as imported."
    ),
    rtol: float = typer.Option(1e-4, min=0.0, help="Tolerance relative to the layer's largest magnitude."),
    atol: float = typer.Option(0.0, min=0.0, help="Absolute tolerance floor."),
    noise_factor: float = typer.Option(
        10.0, min=0.0, help="Tolerance in multiples of the engine's own noise."
    ),
    threads: int | None = typer.Option(None, min=1, help="Threads for both engines (default: all cores)."),
    seed: int = typer.Option(0, help="Seed of the random input and of the noise run's nudges."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """Compare MODEL's every intermediate tensor with another engine's and show the first layer over tolerance."""
    feeds = read_inputs(inputs)
    with measuring_progress(TextColumn("{task.description}"), disable=as_json) as progress:
        task = progress.add_task("comparing", total=STAGES)
        result = compare_layers(
            model,
            against,
            weights=weights,
            peer_model=peer_model,
            peer_weights=peer_weights,
            feeds=feeds,
            shape=parse_shape(shape) if shape else None,
            optimize=optimize,
            tolerance=Tolerance(noise_factor=noise_factor, rtol=rtol, atol=atol),
            threads=threads,
            seed=seed,
            on_stage=step(progress, task),
        )
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        show(result)


def read_inputs(specs: list[str]) -> dict[str, np.ndarray] | np.ndarray | None:
    """``--input`` values as feeds: one bare FILE.npy, or NAME=FILE.npy each."""
    if not specs:
        return None
    if len(specs) == 1 and "=" not in specs[0]:
        return load_array(Path(specs[0]))
    feeds = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name:
            raise InputError(f"--input {spec!r}: with several inputs, give each as NAME=FILE.npy")
        feeds[name] = load_array(Path(path))
    return feeds


def load_array(path: Path) -> np.ndarray:
    try:
        return np.asarray(np.load(path, allow_pickle=False))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read input array {path}: {exc}") from None


def show(result: Comparison) -> None:
    inputs = ", ".join(f"{name} {list(shape)}" for name, shape in result.inputs.items())
    graph = "optimised graph" if result.optimized else "graph as imported"
    console.print(
        headline(result.model, f": edgecnn ({graph}) against {result.against} on {result.peer_model}")
    )
    console.print(f"  input: {inputs}")
    console.print(f"  noise: {result.noise_source}")
    tol = result.tolerance
    console.print(
        f"  tolerance: max({tol.noise_factor:g} x noise, {tol.rtol:g} x the layer's largest |value|, {tol.atol:g})"
    )
    console.print(layer_table(result))
    if result.hidden:
        console.print(
            f"{len(result.hidden)} tensor(s) both engines name are fused or folded away in the optimised "
            f"graph ({', '.join(result.hidden)}); --no-optimize compares them too"
        )
    if result.unmatched:
        console.print(
            f"{result.unmatched} of {result.against}'s layer(s) have no tensor of edgecnn's to compare with"
        )
    first = result.first_over
    if first is None:
        console.print(f"every one of {len(result.layers)} layer(s) is within tolerance")
        return
    detail = (
        f"max abs {first.diff.max_abs:.3g} over tolerance {first.diff.tolerance:.3g}"
        if first.diff is not None
        else f"shape {list(first.shape)} against {list(first.peer_shape)}"
    )
    console.print(
        headline(
            "first layer over tolerance: ", f"{first.layer} ({first.op}), tensor {first.tensor}: {detail}"
        )
    )


def layer_table(result: Comparison) -> Table:
    """One row per compared tensor, named by edgecnn's layer (and the tensor, where its name
    differs); the peer's shape is shown where it differs (it was reshaped to edgecnn's)."""
    table = Table(box=None, header_style="bold")
    for column in ("#", "layer", "op", "shape", "max abs", "max rel", "cosine", "tol", "status"):
        numeric = column in ("#", "max abs", "max rel", "cosine", "tol")
        table.add_column(
            column,
            justify="right" if numeric else "left",
            no_wrap=numeric or column in ("shape", "status"),
            overflow="fold",
        )
    for index, row in enumerate(result.layers):
        d = row.diff
        shape = "x".join(map(str, row.shape))
        if row.peer_shape != row.shape:
            shape += f" ({result.against}: {'x'.join(map(str, row.peer_shape))})"
        numbers = (
            (f"{d.max_abs:.1e}", f"{d.max_rel:.1e}", f"{d.cosine:.5f}", f"{d.tolerance:.1e}")
            if d
            else ("",) * 4
        )
        layer = row.layer if row.tensor == row.layer else f"{row.layer} -> {row.tensor}"
        table.add_row(str(index), layer, row.op, shape, *numbers, row.status)
    return table
