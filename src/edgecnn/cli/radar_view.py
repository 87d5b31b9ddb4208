"""`edgecnn demo --radar`: seed 003's radar example (edgecnn.radar) with progress bars and its
results as tables: training epochs, held-out accuracy per class, throughput per core."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from rich.progress import TaskID
from rich.table import Table

from edgecnn.cli.console import console, headline, training_progress
from edgecnn.radar import ExampleHooks, ExampleReport, ExampleSettings, run_example
from edgecnn.train import EpochStats


def radar_demo(save: Path | None, seed: int, show_progress: bool = True) -> ExampleReport:
    """Run the example, writing into ``save`` (default: a new temporary directory), and print it."""
    settings = ExampleSettings(seed=seed)
    directory = save or Path(tempfile.mkdtemp(prefix="edgecnn-radar-"))
    console.print(
        headline(
            "seed 003 radar classifier",
            f" — simulated range profiles of {settings.radar.cells} cells, 10 target classes; "
            f"{settings.train_per_class} training and {settings.test_per_class} held-out returns per "
            f"class (seed {seed})",
        )
    )
    console.print(
        f"{'epoch':>5}  {'loss':>7}  {'train acc':>9}  {'held-out acc':>12}  {'s':>5}", style="bold"
    )
    started = time.perf_counter()
    with training_progress(show_progress) as progress:
        task: TaskID = progress.add_task("simulating", total=None, loss=float("nan"))

        def on_stage(name: str, steps: int) -> None:
            progress.update(task, description=name, completed=0, total=steps or None)

        def on_epoch(stats: EpochStats) -> None:
            console.print(
                f"{stats.epoch:>5}  {stats.loss:>7.4f}  {stats.accuracy:>9.2%}  "
                f"{stats.val_accuracy or 0:>12.2%}  {stats.seconds:>5.1f}"
            )
            progress.update(task, completed=stats.epoch)

        hooks = ExampleHooks(
            on_stage=on_stage,
            on_batch=lambda index, total, loss: progress.update(task, loss=loss),
            on_epoch=on_epoch,
            on_run=lambda: progress.update(task, advance=1),
        )
        report = run_example(directory, settings, hooks)
    print_report(report, time.perf_counter() - started)
    return report


def print_report(report: ExampleReport, seconds: float) -> None:
    evaluation = report.evaluation
    table = Table(box=None, header_style="bold")
    for column in ("class", "held-out returns", "recognised"):
        table.add_column(column, justify="left" if column == "class" else "right")
    for name, total, recall in zip(evaluation.classes, evaluation.confusion.sum(axis=1), evaluation.recall()):
        table.add_row(name, str(total), f"{recall:.1%}")
    console.print(table)
    console.print(
        f"held-out accuracy of {report.model_path} (loaded back from the seed-003 file): "
        f"{evaluation.accuracy:.2%}; confusion matrix: {report.figure_path}",
        soft_wrap=True,
    )
    speed = Table(
        box=None, header_style="bold", title="data-parallel inference (the batch split across cores)"
    )
    for column in ("cores", "returns", "returns/s", "returns/s per core", "s"):
        speed.add_column(column, justify="right")
    for row in report.throughput:
        speed.add_row(
            str(row.cores),
            f"{row.returns:,}",
            f"{row.per_second:,.0f}",
            f"{row.per_core:,.0f}",
            f"{row.seconds:.3f}",
        )
    console.print(speed)
    console.print(
        f"the example took {seconds:.1f} s; inspect the model with: edgecnn info {report.model_path}"
    )
