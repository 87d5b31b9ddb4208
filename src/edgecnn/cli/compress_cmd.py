"""`edgecnn compress`: prune and quantise a model's weights into a smaller .ecnn, and show what it cost."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from edgecnn.cli.console import console, human_bytes

if TYPE_CHECKING:
    from edgecnn.compress.report import Comparison, TensorRow

NAME = "compress"


def parse_prune(values: list[str]) -> tuple[float | None, dict[str, float]]:
    """['0.2', 'fc6=0.1'] -> (0.2, {'fc6': 0.1}): a bare KEEP applies to every prunable layer."""
    default: float | None = None
    layers: dict[str, float] = {}
    for text in values:
        name, sep, number = text.rpartition("=")
        try:
            keep = float(number)
        except ValueError:
            raise typer.BadParameter(f"'{text}': expected KEEP or LAYER=KEEP with KEEP in 0..1") from None
        if not 0.0 <= keep <= 1.0:
            raise typer.BadParameter(f"'{text}': the keep ratio must be in 0..1")
        if not sep:
            default = keep
        elif not name:
            raise typer.BadParameter(f"'{text}': the layer name before '=' is empty")
        else:
            layers[name] = keep
    return default, layers


def command(
    model: Path = typer.Argument(..., help="Model file (.onnx, .prototxt, .cfg, .ecnn)."),
    output: Path = typer.Option(..., "--output", "-o", help="The compressed .ecnn file to write."),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights)."),
    prune: list[str] = typer.Option(
        [],
        "--prune",
        metavar="[LAYER=]KEEP",
        help="Keep this fraction of the largest-|w| weights: of every Conv/Gemm/MatMul layer (bare KEEP) "
        "or of one layer (LAYER=KEEP; repeat the option).",
    ),
    quantize: str | None = typer.Option(
        None, help="Store weights as int8 (per output channel) or fp16; activations stay float32."
    ),
    sparse_threshold: float = typer.Option(
        0.5, min=0.0, max=1.0, help="Store a weight as CSR when its density is below this and CSR is smaller."
    ),
    iterations: int = typer.Option(10, min=1, help="Timed forward passes per model (median reported)."),
    samples: int = typer.Option(8, min=1, help="Random inputs for the top-1 agreement."),
    seed: int = typer.Option(0, help="Seed of the random inputs."),
    shape: str | None = typer.Option(None, help="Input shape for symbolic dimensions, e.g. 1x3x224x224."),
    threads: int | None = typer.Option(None, min=1, help="Threads (default: all cores)."),
) -> None:
    """Compress MODEL's weights into OUTPUT (.ecnn) and compare it with the uncompressed model."""
    from edgecnn.compress import compress
    from edgecnn.compress.report import compare, tensor_rows
    from edgecnn.format import save_ecnn
    from edgecnn.importers import load_graph
    from edgecnn.vision.preprocess import parse_shape

    if quantize is not None and quantize not in ("int8", "fp16"):
        raise typer.BadParameter(f"'{quantize}': use int8 or fp16", param_hint="--quantize")
    keep, layers = parse_prune(prune)
    graph = load_graph(model, weights)
    compressed, plan = compress(
        graph, prune=keep, prune_layers=layers, quantize=quantize, sparse_threshold=sparse_threshold
    )
    save_ecnn(compressed, output, storage=plan)
    console.print(storage_table(tensor_rows(compressed, plan)))
    with tempfile.TemporaryDirectory(prefix="edgecnn-compress-") as folder:
        raw_path = Path(folder) / "raw.ecnn"
        save_ecnn(graph, raw_path)
        inputs = [spec.name for spec in graph.inputs if spec.name not in graph.initializers]
        shapes = {inputs[0]: parse_shape(shape)} if shape and inputs else None
        result = compare(
            raw_path,
            output,
            seed=seed,
            samples=samples,
            iterations=iterations,
            threads=threads,
            shapes=shapes,
        )
    console.print(comparison_table(result))
    console.print(f"wrote {output}")


def storage_table(rows: list[TensorRow]) -> Table:
    table = Table(box=None, header_style="bold", title="weights", title_justify="left")
    for column in ("layer", "shape", "density", "storage", "raw", "stored"):
        table.add_column(column, justify="left" if column in ("layer", "storage") else "right")
    for row in rows:
        table.add_row(
            row.layer,
            "x".join(map(str, row.shape)),
            f"{row.density:.1%}",
            row.storage,
            human_bytes(row.raw_bytes),
            human_bytes(row.stored_bytes),
        )
    return table


def comparison_table(result: Comparison) -> Table:
    before, after = result.before, result.after
    table = Table(box=None, header_style="bold", title="before / after", title_justify="left")
    for column in ("", "raw .ecnn", "compressed", "ratio"):
        table.add_column(column, justify="left" if not column else "right")
    table.add_row(
        "file size",
        human_bytes(before.file_bytes),
        human_bytes(after.file_bytes),
        f"{after.file_bytes / before.file_bytes:.1%}",
    )
    table.add_row("load (file -> graph)", *_ms_pair(before.load_ms, after.load_ms))
    table.add_row(
        f"latency (median of {result.iterations})",
        *_ms_pair(before.latency_ms, after.latency_ms),
    )
    table.add_row("max |output difference|", "", f"{result.max_abs_diff:.3g}", "")
    table.add_row(
        f"top-1 agreement ({result.samples} inputs)",
        "",
        f"{result.top1_agreement:.0%}",
        "",
    )
    return table


def _ms_pair(before: float, after: float) -> tuple[str, str, str]:
    return f"{before:.1f} ms", f"{after:.1f} ms", f"{after / before:.2f}x" if before > 0 else ""
