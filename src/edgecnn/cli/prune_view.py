"""What `edgecnn train` and `edgecnn compress` share on the terminal: their ``[LAYER=]KEEP``
options, and the prune-retrain workflow (edgecnn.compress.workflow) shown as a progress bar while
retraining, then one table row per cut. The library is imported when a command runs, not when the
CLI starts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from edgecnn.cli.console import console, training_progress
from edgecnn.errors import InputError

if TYPE_CHECKING:
    from edgecnn.compress.retrain import RetrainStage
    from edgecnn.compress.workflow import RetrainBudget
    from edgecnn.train import Dataset, Trainer


def keep_option(values: list[str], option: str) -> tuple[float | None, dict[str, float]]:
    """The (default, per-layer) keep ratios of an option's ``[LAYER=]KEEP`` values; a bad value is
    a usage error naming ``option``."""
    from edgecnn.compress.workflow import parse_keeps

    try:
        return parse_keeps(values)
    except InputError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


def percent(value: float | None) -> str:
    """0.9812 -> '98.12%'; None (not measured) -> '-'."""
    return "-" if value is None else f"{value:.2%}"


def show_prune_retrain(
    trainer: Trainer,
    train: Dataset,
    test: Dataset,
    keep: float | None,
    layers: Mapping[str, float],
    budget: RetrainBudget,
    show: bool,
) -> None:
    """Run ``prune_with_retraining`` with a progress bar (when ``show``), then print its stages."""
    from edgecnn.compress.workflow import prune_with_retraining

    table = Table(
        "stage", "kept", "test acc after cut", "retrained",
        box=None, header_style="bold", title="prune-retrain", title_justify="left",
    )  # fmt: skip
    with training_progress(show) as progress:
        task = progress.add_task("retrain", total=budget.steps, loss=float("nan"))

        def on_batch(index: int, total: int, loss: float) -> None:
            progress.update(task, completed=index + 1, total=total, loss=loss)

        def on_stage(stage: RetrainStage) -> None:
            progress.reset(task)
            kept = " ".join(f"{name}={value:g}" for name, value in stage.keeps.items())
            table.add_row(str(stage.stage), kept, percent(stage.pruned_accuracy), percent(stage.accuracy))

        prune_with_retraining(trainer, train, test, keep, layers, budget, on_stage, on_batch)
    console.print(table)
