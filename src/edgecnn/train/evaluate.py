"""Accuracy on a labelled set as the inference engine computes it: the score the sensitivity scan
(edgecnn.compress.sensitivity) ranks pruned models by."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edgecnn.ir.graph import Graph
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.train.data.dataset import Dataset


def engine_accuracy(graph: Graph, data: Dataset, batch_size: int = 256, threads: int | None = None) -> float:
    """Top-1 accuracy of ``graph`` run by edgecnn.Model on ``data`` (in batches of the model's fixed
    batch size, if it declares one)."""
    model = Model(graph, RuntimeOptions.resolve(threads=threads))
    declared = model.inputs[0].shape[0] if model.inputs and model.inputs[0].shape else None
    if isinstance(declared, int):
        batch_size = declared
    correct = 0
    for x, y in data.batches(batch_size):
        scores = model(x)
        first = scores[0] if isinstance(scores, tuple) else scores
        correct += int((np.asarray(first).reshape(len(y), -1).argmax(axis=1) == y).sum())
    return correct / len(data) if len(data) else float("nan")


def accuracy_score(
    data: Dataset, batch_size: int = 256, threads: int | None = None
) -> Callable[[Graph], float]:
    """A ``Score`` for ``edgecnn.compress.sensitivity``: validation accuracy of a candidate graph."""

    def score(graph: Graph) -> float:
        return engine_accuracy(graph, data, batch_size, threads)

    return score
