"""Training the radar classifier with edgecnn's trainer, and scoring a trained model file on held-out
returns: accuracy and the confusion matrix."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from edgecnn.errors import InputError
from edgecnn.model import Model
from edgecnn.radar.network import untrained_network
from edgecnn.train import EpochStats, TrainConfig, Trainer
from edgecnn.train.data.dataset import Dataset
from edgecnn.train.trainer import BatchCallback

TRAINING = TrainConfig(epochs=12, batch_size=64, lr=0.05, schedule="cosine", weight_decay=5e-4)
"""The example's settings: plain SGD with momentum, a cosine schedule, no augmentation (the
simulation's aspect and range jitter already vary every return)."""


def train_classifier(
    train: Dataset,
    val: Dataset | None = None,
    config: TrainConfig = TRAINING,
    on_batch: BatchCallback | None = None,
    on_epoch: Callable[[EpochStats], None] | None = None,
) -> Trainer:
    """Seed 003's network, He-initialised from ``config.seed``, trained on ``train``."""
    trainer = Trainer(untrained_network(config.seed), config)
    trainer.fit(train, val=val, on_batch=on_batch, on_epoch=on_epoch)
    return trainer


@dataclass(frozen=True)
class Evaluation:
    """Scores of a model on a labelled set; ``confusion[i, j]`` counts returns of class i classified j."""

    classes: tuple[str, ...]
    confusion: np.ndarray

    @property
    def accuracy(self) -> float:
        return float(np.trace(self.confusion) / max(int(self.confusion.sum()), 1))

    def recall(self) -> np.ndarray:
        """Per class, the share of its returns classified correctly."""
        totals = self.confusion.sum(axis=1)
        return np.diag(self.confusion) / np.maximum(totals, 1)


def confusion_matrix(labels: np.ndarray, predicted: np.ndarray, classes: int) -> np.ndarray:
    """(classes, classes) int64 counts, true class by row and predicted class by column."""
    matrix = np.zeros((classes, classes), np.int64)
    np.add.at(matrix, (labels, predicted), 1)
    return matrix


def evaluate(model: Model, data: Dataset, batch_size: int = 1024) -> Evaluation:
    """Classify every return of ``data`` with ``model`` (edgecnn inference) and count the outcomes."""
    if len(data) == 0:
        raise InputError(f"{data.name}: no returns to evaluate on")
    predicted = np.concatenate([np.asarray(model(x)).argmax(axis=1) for x, _ in data.batches(batch_size)])
    return Evaluation(data.classes, confusion_matrix(data.labels, predicted, len(data.classes)))
