"""Iterative prune-retrain (seed 001 §3.3.1, Fig. 3.13): rather than cutting a layer to its lowest
retention at once, walk a falling retention schedule (0.95, 0.90, ... down to the target), and after
each cut retrain with the masks held so the pruned weights stay exactly zero."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from edgecnn.compress.prune import check_keep, keep_ratios, magnitude_mask
from edgecnn.errors import InputError
from edgecnn.train.optim import Schedule

if TYPE_CHECKING:
    from edgecnn.train.data import Dataset
    from edgecnn.train.trainer import BatchCallback, Trainer


def retention_schedule(target: float, step: float = 0.05, start: float = 0.95) -> list[float]:
    """[start, start - step, ..., target]: every retention above ``target``, then ``target`` itself."""
    check_keep(target, "retention target")
    if step <= 0:
        raise InputError(f"the retention step must be > 0, got {step}")
    values: list[float] = []
    value = start
    while value > target + 1e-9:
        values.append(round(value, 6))
        value -= step
    return [*values, float(target)]


@dataclass(frozen=True)
class RetrainStage:
    stage: int  # 1-based
    keeps: dict[str, float]  # node name -> retention in this stage
    pruned_accuracy: float | None  # on the validation set, right after the cut
    accuracy: float | None  # after retraining
    loss: float  # mean training loss of the retraining steps


def prune_retrain(
    trainer: Trainer,
    train: Dataset,
    *,
    keep: float | None = None,
    layers: Mapping[str, float] | None = None,
    steps: int = 100,
    final_steps: int = 0,
    lr: float = 0.005,
    step: float = 0.05,
    val: Dataset | None = None,
    on_stage: Callable[[RetrainStage], None] | None = None,
    on_batch: BatchCallback | None = None,
) -> list[RetrainStage]:
    """Prune ``trainer``'s model to ``keep`` (every weight layer) or ``layers`` ({node or tensor:
    keep}) along retention schedules of ``step``, retraining ``steps`` SGD steps at ``lr`` after
    each cut; after the last (the deepest cut, which needs the most recovery) ``final_steps`` more
    follow with the rate annealed from ``lr`` to 0 (cosine). Layers with short schedules hold their
    target while the others go on."""
    if steps < 0 or final_steps < 0:
        raise InputError(f"retrain steps must be >= 0, got {steps} and {final_steps}")
    ratios = keep_ratios(trainer.network.source, keep, layers)
    schedules = {layer: retention_schedule(ratio, step) for layer, ratio in ratios.items() if ratio < 1.0}
    stages = max((len(s) for s in schedules.values()), default=0)
    history: list[RetrainStage] = []
    for index in range(stages):
        keeps = {layer: schedule[min(index, len(schedule) - 1)] for layer, schedule in schedules.items()}
        masks = dict(trainer.masks)
        for layer, ratio in keeps.items():
            masks[layer.tensor] = magnitude_mask(trainer.network.values[layer.tensor], ratio)
        trainer.set_masks(masks)
        pruned_accuracy = trainer.evaluate(val)[1] if val is not None else None
        loss = trainer.train_steps(train, steps, lr, index, on_batch) if steps else float("nan")
        if index == stages - 1 and final_steps:
            annealed = Schedule("cosine", lr, epochs=final_steps)
            loss = trainer.train_steps(train, final_steps, annealed.at, stages, on_batch)
        accuracy = trainer.evaluate(val)[1] if val is not None else None
        stage = RetrainStage(
            index + 1, {layer.node: k for layer, k in keeps.items()}, pruned_accuracy, accuracy, loss
        )
        history.append(stage)
        if on_stage is not None:
            on_stage(stage)
    return history
