"""`edgecnn batch`: a model over many inputs on every core (or a Ray cluster), into committed shards."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from edgecnn.cli.console import console, error_console, headline
from edgecnn.cli.run_cmd import image_preprocess
from edgecnn.vision.detector import read_labels_file

NAME = "batch"


def command(
    model: Path = typer.Argument(..., help="Model file (.onnx, .prototxt, .cfg, .ecnn)."),
    inputs: list[str] = typer.Argument(
        ..., help="Image folders, images, globs, lists of paths (.txt), .npy/.npz, Parquet/CSV tables."
    ),
    output: Path = typer.Option(..., "-o", "--output", help="Output folder (shards; resumed if it exists)."),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights)."),
    task: str = typer.Option("classify", help="classify (top-k), detect (YOLO boxes) or raw (tensors)."),
    size: str | None = typer.Option(None, help="Resize images to HxW (default: the model's input size)."),
    rgb: bool = typer.Option(True, "--rgb/--bgr", help="Channel order the model was trained with."),
    scale: float = typer.Option(1.0, help="Multiply pixels (0..255) by this, e.g. 0.00392156862745098."),
    mean: str | None = typer.Option(None, help="Per-channel mean subtracted after scaling: a,b,c."),
    std: str | None = typer.Option(None, help="Per-channel std divided by after the mean: a,b,c."),
    layout: str = typer.Option("nchw", help="Tensor layout of the model's input: nchw or nhwc."),
    letterbox: bool = typer.Option(
        False, "--letterbox", help="Keep the aspect ratio and pad (classify, raw)."
    ),
    apply_softmax: bool = typer.Option(False, "--softmax", help="Softmax over the scores before the top-k."),
    top: int = typer.Option(5, min=1, help="Classes kept per input (classify)."),
    labels: Path | None = typer.Option(None, help="Text file with one class label per line."),
    head: str | None = typer.Option(
        None, help="Detection head (detect): darknet, yolov8, yolov5, yolov3, yolov2."
    ),
    score_threshold: float = typer.Option(0.25, help="Lowest detection score kept (detect)."),
    iou_threshold: float = typer.Option(0.45, help="IoU above which NMS drops a box (detect)."),
    column: str | None = typer.Option(None, help="Table column with paths or arrays (default: path)."),
    output_format: str = typer.Option("parquet", "--format", help="parquet or jsonl."),
    workers: int | None = typer.Option(None, min=1, help="Worker processes (default: one per core)."),
    threads: int | None = typer.Option(None, min=1, help="Intra-op threads per worker (default: 1)."),
    batch_size: int = typer.Option(8, min=1, help="Most items one worker runs at once."),
    shard_rows: int = typer.Option(256, min=1, help="Rows per committed shard."),
    retries: int = typer.Option(2, min=0, help="Times an item whose worker crashed is run again."),
    bind: bool = typer.Option(True, "--bind/--no-bind", help="Bind each worker to its own cores."),
    engine: str = typer.Option("local", help="local (this machine's cores) or ray (Ray Data)."),
    address: str | None = typer.Option(
        None, help="Ray cluster address (--engine ray; default: a local one)."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Run MODEL over every INPUT with worker processes on all cores (or Ray), writing one row per
    input to committed shards in OUTPUT; the same command resumes a killed job."""
    import edgecnn
    from edgecnn import batch
    from edgecnn.batch.tasks import TaskSpec

    net = edgecnn.load(model, weights, threads=1)
    preprocess = image_preprocess(net.inputs[0] if net.inputs else None, size, rgb, scale, mean, std, layout)
    del net
    spec = TaskSpec(
        kind=task,
        preprocess=preprocess,
        letterbox=letterbox,
        top=top,
        apply_softmax=apply_softmax,
        labels=tuple(read_labels_file(labels)) if labels else (),
        head=head,
        score_threshold=score_threshold,
        iou_threshold=iou_threshold,
    )
    job = batch.BatchJob(
        model=str(model),
        output=str(output),
        task=spec,
        weights=str(weights) if weights else None,
        output_format=output_format,
        workers=workers,
        threads=threads,
        batch_size=batch_size,
        shard_rows=shard_rows,
        max_retries=retries,
        bind=bind,
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
        console=error_console,
        transient=True,
        disable=quiet,
    ) as progress:
        bar = progress.add_task("starting workers", total=None, rate="")
        first_row: list[float] = []

        def start(todo: int, total: int) -> None:
            progress.update(bar, total=todo, description=f"{total - todo} of {total} done before;")

        def rows(count: int) -> None:
            now = time.monotonic()
            if not first_row:
                first_row.append(now)
                progress.update(bar, description="batch")
            done = progress.tasks[0].completed + count
            rate = done / (now - first_row[0]) if now > first_row[0] else 0.0
            progress.update(bar, advance=count, rate=f"{rate:.1f} items/s")

        summary = batch.run(
            job, inputs, column=column, engine=engine, address=address, on_start=start, on_rows=rows
        )
    console.print(
        headline(
            summary.output,
            f": {summary.items} input(s), {summary.committed} row(s) committed now "
            f"({summary.already_done} before), {summary.failed} with an error; "
            f"{summary.items_per_s:.1f} items/s over {summary.seconds:.1f} s with {summary.workers} "
            f"{'actor' if engine == 'ray' else 'worker'}(s) x {summary.threads} thread(s)",
        )
    )
