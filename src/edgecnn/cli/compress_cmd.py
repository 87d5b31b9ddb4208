"""`edgecnn compress`: prune (one-shot, or iteratively with retraining on a labelled set) and quantise
a model's weights into a smaller .ecnn, and show what it cost, in accuracy too when labels are given."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from edgecnn.cli.console import console, human_bytes
from edgecnn.cli.protect_options import ENCRYPT_OPTION, SIGN_OPTION, protection
from edgecnn.cli.prune_view import keep_option, show_prune_retrain

if TYPE_CHECKING:
    from edgecnn.compress.report import Comparison, TensorRow
    from edgecnn.compress.workflow import RetrainBudget
    from edgecnn.ir.graph import Graph
    from edgecnn.train import Dataset

NAME = "compress"


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
        None,
        help="Store weights as int8 (per output channel) or fp16; activations stay float32 unless "
        "--calibration is given with int8.",
    ),
    calibration: Path | None = typer.Option(
        None,
        "--calibration",
        metavar="DIR",
        help="With --quantize int8: images or .npy inputs to calibrate activation ranges on; the output "
        "then runs int8 layers (uint8 activations x int8 weights -> int32) instead of decoding int8 "
        "weights to float32.",
    ),
    calibration_method: str = typer.Option(
        "minmax", "--calibration-method", help="Activation ranges by minmax, percentile (99.99%) or kl."
    ),
    sparse_threshold: float = typer.Option(
        0.5, min=0.0, max=1.0, help="Store a weight as CSR when its density is below this and CSR is smaller."
    ),
    entropy: str | None = typer.Option(
        None,
        metavar="zlib|lzma",
        help="Entropy-code stored tensors with this coder where it saves 5% or more (format 1.2).",
    ),
    retrain: str | None = typer.Option(
        None,
        "--retrain",
        metavar="DATASET",
        help="With --prune: prune along 0.95, 0.90, ... down to KEEP, retraining on this labelled set "
        "(digits, idx:DIR or folder:DIR) after each cut with the masks held; its test split gives "
        "the accuracy row.",
    ),
    eval_set: str | None = typer.Option(
        None,
        "--eval",
        metavar="DATASET",
        help="Report top-1 accuracy of both models on this set's test split (default: --retrain's).",
    ),
    retrain_steps: int = typer.Option(80, min=0, help="SGD steps of retraining after each pruning cut."),
    final_steps: int = typer.Option(0, min=0, help="Extra retraining steps after the last cut."),
    retrain_lr: float = typer.Option(0.01, min=0.0, help="Learning rate of retraining."),
    retention_step: float = typer.Option(
        0.05, min=0.001, max=1.0, help="Step of the falling retention schedule."
    ),
    batch_size: int = typer.Option(64, min=1, help="Mini-batch size of retraining."),
    shift: int = typer.Option(
        2, min=0, help="Retraining augmentation: random translation up to this many pixels."
    ),
    test_fraction: float = typer.Option(
        0.2, min=0.01, max=0.99, help="Held-out share of digits/folder data (as in `edgecnn train`)."
    ),
    iterations: int = typer.Option(10, min=1, help="Timed forward passes per model (median reported)."),
    samples: int = typer.Option(8, min=1, help="Random inputs for the top-1 agreement."),
    seed: int = typer.Option(0, help="Seed of the random inputs, of retraining and of the test split."),
    shape: str | None = typer.Option(None, help="Input shape for symbolic dimensions, e.g. 1x3x224x224."),
    threads: int | None = typer.Option(None, min=1, help="Threads (default: all cores)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar while retraining."),
    encrypt: Path | None = ENCRYPT_OPTION,
    sign: Path | None = SIGN_OPTION,
) -> None:
    """Compress MODEL's weights into OUTPUT (.ecnn) and compare it with the uncompressed model."""
    from edgecnn.compress import compress
    from edgecnn.compress.report import compare, tensor_rows
    from edgecnn.compress.workflow import RetrainBudget
    from edgecnn.format import save_ecnn
    from edgecnn.format.entropy_plan import entropy_plan
    from edgecnn.importers import load_graph
    from edgecnn.vision.preprocess import parse_shape

    if quantize is not None and quantize not in ("int8", "fp16"):
        raise typer.BadParameter(f"'{quantize}': use int8 or fp16", param_hint="--quantize")
    if entropy is not None and entropy not in ("zlib", "lzma"):
        raise typer.BadParameter(f"'{entropy}': use zlib or lzma", param_hint="--entropy")
    if calibration is not None and quantize != "int8":
        raise typer.BadParameter("calibration needs --quantize int8", param_hint="--calibration")
    if calibration_method not in ("minmax", "percentile", "kl"):
        raise typer.BadParameter(
            f"'{calibration_method}': use minmax, percentile or kl", param_hint="--calibration-method"
        )
    keep, layers = keep_option(prune, "--prune")
    protected = protection(encrypt, sign)
    if retrain is not None and keep is None and not layers:
        raise typer.BadParameter(
            "retraining recovers what pruning cost, so it needs --prune [LAYER=]KEEP "
            "(for accuracy without pruning use --eval DATASET)",
            param_hint="--retrain",
        )
    graph = load_graph(model, weights)
    retrain_data = splits(graph, retrain, test_fraction, seed) if retrain is not None else None
    labelled: Labelled | None = None
    if eval_set is not None:
        labelled = Labelled.of(eval_set, splits(graph, eval_set, test_fraction, seed)[1], threads)
    elif retrain is not None and retrain_data is not None:
        labelled = Labelled.of(retrain, retrain_data[1], threads)
    source = graph  # the uncompressed model stays the "before" of the table
    if retrain is not None and retrain_data is not None:
        budget = RetrainBudget(retrain_steps, final_steps, retrain_lr, retention_step, batch_size, shift)
        source = retrained(graph, retrain, *retrain_data, keep, layers, budget, seed, threads, not quiet)
        keep, layers = None, {}  # pruned already, the masks held while retraining
    if calibration is not None:
        compressed, plan = compress(
            source, prune=keep, prune_layers=layers, sparse_threshold=sparse_threshold
        )
        compressed = calibrated_int8(compressed, calibration, calibration_method, threads)
        plan = {name: storage for name, storage in plan.items() if name in compressed.initializers}
        if entropy is not None:
            plan = entropy_plan(compressed, plan, entropy)
        save_ecnn(compressed, output, storage=plan, **protected)
        console.print(int8_table(compressed, calibration_method))
        console.print(calibration_agreement(graph, compressed, calibration, threads))
    else:
        compressed, plan = compress(
            source, prune=keep, prune_layers=layers, quantize=quantize, sparse_threshold=sparse_threshold
        )
        if entropy is not None:
            plan = entropy_plan(compressed, plan, entropy)
        save_ecnn(compressed, output, storage=plan, **protected)
        console.print(storage_table(tensor_rows(compressed, plan)))
        if quantize == "int8":
            console.print(
                "int8 weight storage only: weights decode to float32 at load and layers run in float32 "
                "(give --calibration DIR for int8 execution)"
            )
    with tempfile.TemporaryDirectory(prefix="edgecnn-compress-") as folder:
        raw_path = Path(folder) / "raw.ecnn"
        save_ecnn(graph, raw_path)
        compared = output
        if encrypt is not None or sign is not None:  # the comparison reads a plain copy
            compared = Path(folder) / "compressed.ecnn"
            save_ecnn(compressed, compared, storage=plan)
        inputs = [spec.name for spec in graph.inputs if spec.name not in graph.initializers]
        shapes = {inputs[0]: parse_shape(shape)} if shape and inputs else None
        result = compare(
            raw_path,
            compared,
            seed=seed,
            samples=samples,
            iterations=iterations,
            threads=threads,
            shapes=shapes,
            score=labelled.score if labelled is not None else None,
        )
    console.print(comparison_table(result, labelled.title if labelled is not None else None))
    if labelled is None:
        console.print(
            "no labelled set: the agreement above is on random inputs, not accuracy "
            "(give --eval DATASET or --retrain DATASET)"
        )
    console.print(f"wrote {output}")


@dataclass(frozen=True)
class Labelled:
    """The test split the accuracy row is measured on, and how the table names it."""

    title: str
    score: Callable[[Graph], float]

    @classmethod
    def of(cls, spec: str, test: Dataset, threads: int | None) -> Labelled:
        from edgecnn.train.evaluate import accuracy_score

        return cls(
            f"top-1 accuracy ({len(test)} test images of {spec})",
            accuracy_score(test, threads=threads),
        )


def splits(graph: Graph, spec: str, test_fraction: float, seed: int) -> tuple[Dataset, Dataset]:
    """(train, test) of ``spec`` at the model's input size, split as `edgecnn train` splits it."""
    from edgecnn.train.data import load_dataset_for

    return load_dataset_for(graph, spec, test_fraction, seed)


def retrained(
    graph: Graph,
    spec: str,
    train: Dataset,
    test: Dataset,
    keep: float | None,
    layers: dict[str, float],
    budget: RetrainBudget,
    seed: int,
    threads: int | None,
    show: bool,
) -> Graph:
    """``graph`` pruned to ``keep``/``layers`` along the falling retention schedule, retrained on
    ``train`` after every cut with the pruned weights held at zero (``test`` scores each stage)."""
    from edgecnn.compress.workflow import retraining_trainer

    trainer = retraining_trainer(graph, test, budget, seed, threads)
    _, channels, height, width = train.images.shape
    console.print(
        f"retraining on {spec}: {len(train)} training, {len(test)} test images of "
        f"{channels}x{height}x{width}; {budget.steps} steps at lr {budget.lr:g} after each cut"
        + (f", {budget.final_steps} more after the last" if budget.final_steps else "")
    )
    show_prune_retrain(trainer, train, test, keep, layers, budget, show)
    return trainer.graph


def calibrated_int8(graph: Graph, directory: Path, method: str, threads: int | None) -> Graph:
    """The graph with int8 layers, activation ranges calibrated on the inputs in ``directory``."""
    import edgecnn.kernels.cpu.int8.steps  # noqa: F401  (registers the int8 kernels)
    from edgecnn.compress.calibrate import calibration_inputs
    from edgecnn.compress.int8 import quantize_int8

    inputs = [spec for spec in graph.inputs if spec.name not in graph.initializers]
    if len(inputs) != 1:
        raise typer.BadParameter("calibration supports models with one input", param_hint="--calibration")
    samples = calibration_inputs(directory, inputs[0])
    console.print(f"calibrating on {len(samples)} input(s) from {directory} ({method})")
    return quantize_int8(graph, samples, method=method, threads=threads)


def calibration_agreement(graph: Graph, int8_graph: Graph, directory: Path, threads: int | None) -> str:
    """Agreement on the calibration inputs, which (unlike the random inputs below) lie in the
    calibrated ranges."""
    from edgecnn.compress.calibrate import calibration_inputs
    from edgecnn.compress.int8 import agreement

    samples = calibration_inputs(directory, int8_graph.inputs[0])
    result = agreement(graph, int8_graph, samples, threads)
    return (
        f"on the {result.samples} calibration input(s): top-1 agreement {result.top1:.1%}, "
        f"max |output difference| {result.max_abs_diff:.3g}"
    )


def int8_table(graph: Graph, method: str) -> Table:
    from edgecnn.compress.int8 import int8_layers

    table = Table(box=None, header_style="bold", title=f"int8 layers ({method})", title_justify="left")
    for column in ("layer", "op", "weights", "input", "output", "activation"):
        table.add_column(column, justify="left")
    for node in int8_layers(graph):
        weights = graph.initializers[node.inputs[3]]
        scale = float(graph.initializers[node.inputs[1]])
        table.add_row(
            node.name or node.outputs[0],
            node.op,
            f"int8 {'x'.join(map(str, weights.shape))}",
            f"scale {scale:.3g}",
            "uint8" if len(node.inputs) > 6 and node.inputs[6] else "float32",
            node.attrs.activation,
        )
    return table


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


def comparison_table(result: Comparison, accuracy_title: str | None = None) -> Table:
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
    if result.accuracy is not None:
        before_acc, after_acc = result.accuracy
        table.add_row(
            accuracy_title or "top-1 accuracy",
            f"{before_acc:.2%}",
            f"{after_acc:.2%}",
            f"{(after_acc - before_acc) * 100:+.2f} pt",
        )
    return table


def _ms_pair(before: float, after: float) -> tuple[str, str, str]:
    return f"{before:.1f} ms", f"{after:.1f} ms", f"{after / before:.2f}x" if before > 0 else ""
