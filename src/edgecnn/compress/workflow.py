"""The prune-retrain workflow that `edgecnn train` and `edgecnn compress` share: reading the
``[LAYER=]KEEP`` targets, the retraining budget, and pruning a model along the falling retention
schedule with retraining after each cut.

It lives in the library, in ``compress`` (which may use ``train``; ``train`` never uses
``compress``), so that the two CLI commands use it without importing each other. It draws nothing:
progress and finished stages come back through callbacks, and each command shows them its way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from edgecnn.compress.retrain import RetrainStage, prune_retrain
from edgecnn.errors import InputError
from edgecnn.train import TrainConfig, Trainer

if TYPE_CHECKING:
    from collections.abc import Callable

    from edgecnn.ir.graph import Graph
    from edgecnn.train import Dataset
    from edgecnn.train.trainer import BatchCallback


def parse_keeps(values: Sequence[str]) -> tuple[float | None, dict[str, float]]:
    """['0.2', 'fc6=0.1'] -> (0.2, {'fc6': 0.1}): a bare KEEP applies to every prunable layer, the
    last '=' separates a layer name (which may itself hold '=') from its KEEP."""
    default: float | None = None
    layers: dict[str, float] = {}
    for text in values:
        name, sep, number = text.rpartition("=")
        try:
            keep = float(number)
        except ValueError:
            raise InputError(f"'{text}': expected KEEP or LAYER=KEEP with KEEP in 0..1") from None
        if not 0.0 <= keep <= 1.0:
            raise InputError(f"'{text}': the keep ratio must be in 0..1")
        if not sep:
            default = keep
        elif not name:
            raise InputError(f"'{text}': the layer name before '=' is empty")
        else:
            layers[name] = keep
    return default, layers


@dataclass(frozen=True)
class RetrainBudget:
    """How much retraining follows each cut. `edgecnn train` and `edgecnn compress` name these
    options the same way, with the same defaults, so both retrain a model to the same weights;
    ``batch_size`` and ``shift`` matter only where the workflow builds the trainer itself."""

    steps: int = 80
    final_steps: int = 0
    lr: float = 0.01
    retention_step: float = 0.05
    batch_size: int = 64
    shift: int = 2


def prune_with_retraining(
    trainer: Trainer,
    train: Dataset,
    test: Dataset,
    keep: float | None,
    layers: Mapping[str, float],
    budget: RetrainBudget,
    on_stage: Callable[[RetrainStage], None] | None = None,
    on_batch: BatchCallback | None = None,
) -> list[RetrainStage]:
    """Prune ``trainer``'s model to ``keep``/``layers`` along the falling retention schedule,
    retraining on ``train`` after every cut with the pruned weights held at zero; ``test`` scores
    each stage."""
    return prune_retrain(
        trainer, train, keep=keep, layers=layers, steps=budget.steps, final_steps=budget.final_steps,
        lr=budget.lr, step=budget.retention_step, val=test, on_stage=on_stage, on_batch=on_batch,
    )  # fmt: skip


def retraining_trainer(
    graph: Graph, test: Dataset, budget: RetrainBudget, seed: int, threads: int | None
) -> Trainer:
    """A trainer of ``graph`` (no epochs of its own) for ``prune_with_retraining``, checked against
    ``test``'s images and classes before any cut."""
    config = TrainConfig(
        epochs=0, batch_size=budget.batch_size, seed=seed, shift=budget.shift, threads=threads or 1
    )
    trainer = Trainer(graph, config)
    trainer.check_data(test)
    return trainer
