"""`edgecnn info`: what a model is made of — layers, shapes, parameters, MACs, memory. A Caffe
prototxt needs no weights here: its structure is read with zero-filled blobs (and said so)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from edgecnn.analysis import ModelAnalysis, analyze
from edgecnn.cli.console import console, headline, human_bytes, human_count, sanitize
from edgecnn.importers import sniff_format
from edgecnn.importers.caffe import is_structure_only
from edgecnn.ir.graph import format_shape
from edgecnn.model import Model
from edgecnn.runtime.feeds import random_feeds
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.vision.preprocess import parse_shape

NAME = "info"


def command(
    model: Path = typer.Argument(..., help="Model file (.onnx, .prototxt, .cfg, .ecnn)."),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights)."),
    shape: str | None = typer.Option(
        None, help="Input shape for models with symbolic dimensions, e.g. 1x3x224x224 (one-input models)."
    ),
    passes: bool = typer.Option(False, "--passes", help="Show the graph after the optimisation passes."),
    verify: bool = typer.Option(
        False, "--verify", help="For .ecnn files: check every tensor's CRC-32 and the file's SHA-256."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """Print MODEL's layer table: op, output shape, parameters and MACs, with totals."""
    net = load_for_info(model, weights)
    structure_only = is_structure_only(net.graph)
    shapes = {net.inputs[0].name: parse_shape(shape)} if shape and net.inputs else None
    feeds = random_feeds(net.inputs, shapes=shapes, budget=net.options.budget)
    plan = net.plan_for(feeds, optimized=passes)
    analysis = analyze(plan, net.graph.outputs)
    if as_json:
        print(json.dumps({**to_json(net, analysis, feeds), "weights": not structure_only}, indent=2))
        return
    console.print(headline(model, f"  ({len(analysis.layers)} layers)"))
    if structure_only:
        console.print("  weights: none given (structure from the prototxt; parameters counted from shapes)")
    for spec in net.inputs:
        console.print(
            f"  input   {sanitize(spec.name)}: {spec.dtype}{format_shape(spec.shape)}"
            f"  (analysed as {list(feeds[spec.name].shape)})"
        )
    for spec in net.outputs:
        console.print(f"  output  {sanitize(spec.name)}: {spec.dtype}{format_shape(spec.shape)}")
    console.print(layer_table(analysis))
    console.print(
        f"total: {human_count(analysis.params)} parameters, {human_count(analysis.macs)} MACs; "
        f"activation memory {human_bytes(analysis.naive_activation_bytes)} naive, "
        f"{human_bytes(analysis.planned_activation_bytes)} planned "
        f"({human_bytes(analysis.arena_bytes)} arena + {human_bytes(analysis.outside_arena_bytes)} outside it)"
    )
    if sniff_format(model) == "ecnn":
        console.print(file_sections(model))
        if verify:
            from edgecnn.api import environment_key
            from edgecnn.format import load_ecnn

            load_ecnn(model, verify=True, key=environment_key())  # an encrypted file's key, if set
            console.print("checksums: every section and tensor CRC-32 and the SHA-256 match")
    if passes:
        for report in net.pass_reports:
            console.print(headline(report.name, f": {len(report.changes)} change(s)"))
            for change in report.changes:
                console.print(f"  {sanitize(change)}")


def load_for_info(model: Path, weights: Path | None) -> Model:
    """The model as `edgecnn.load` reads it, except that a Caffe prototxt without weights is read
    for its structure only (its blobs zero-filled), which is all this command needs."""
    import edgecnn

    if weights is None and model.is_file() and sniff_format(model) == "caffe":
        from edgecnn.importers.caffe import load_caffe

        return Model(load_caffe(model, structure_only=True), RuntimeOptions.resolve(threads=1))
    return edgecnn.load(model, weights, threads=1)


def file_sections(path: Path) -> Table:
    """The .ecnn file's header and section table."""
    from edgecnn.format import read_header

    header = read_header(path)
    table = Table(
        title=f".ecnn format {header.major}.{header.minor}, flags {header.flags:#x}, "
        f"{human_bytes(header.file_size)}",
        box=None,
        header_style="bold",
        title_justify="left",
    )
    for column in ("section", "offset", "length", "crc32", "required"):
        table.add_column(column, justify="left" if column == "section" else "right")
    for section in header.sections:
        table.add_row(
            section.name,
            str(section.offset),
            human_bytes(section.length),
            f"{section.crc32:08x}",
            "yes" if section.required else "no",
        )
    return table


def layer_table(analysis: ModelAnalysis) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("#", "name", "op", "output", "params", "MACs"):
        table.add_column(column, justify="right" if column in ("#", "params", "MACs") else "left")
    for index, layer in enumerate(analysis.layers):
        table.add_row(
            str(index),
            sanitize(layer.name),
            sanitize(layer.op),
            str(layer.output) if layer.output else "?",
            human_count(layer.params) if layer.params else "",
            human_count(layer.macs) if layer.macs else "",
        )
    return table


def to_json(net: Model, analysis: ModelAnalysis, feeds: dict) -> dict:
    return {
        "inputs": [{"name": n, "shape": list(a.shape), "dtype": a.dtype.name} for n, a in feeds.items()],
        "outputs": [{"name": s.name, "shape": list(s.shape or []), "dtype": s.dtype} for s in net.outputs],
        "layers": [
            {
                "name": layer.name,
                "op": layer.op,
                "output_shape": list(layer.output.shape or []) if layer.output else None,
                "params": layer.params,
                "macs": layer.macs,
            }
            for layer in analysis.layers
        ],
        "params": analysis.params,
        "macs": analysis.macs,
        "activation_bytes": {
            "naive": analysis.naive_activation_bytes,
            "planned": analysis.planned_activation_bytes,
            "arena": analysis.arena_bytes,
            "outside_arena": analysis.outside_arena_bytes,
        },
    }
