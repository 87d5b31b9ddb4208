"""The per-layer sensitivity scan of seed 001 §3.3: prune one layer at a time through a falling keep
ratio (0.95 -> 0.05), score each pruned model, and read off how far each layer can go."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.compress.layers import weight_layers
from edgecnn.compress.prune import prune
from edgecnn.ir.graph import Graph
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions

DEFAULT_KEEPS = tuple(round(0.95 - 0.05 * i, 2) for i in range(19))
"""0.95, 0.90, ..., 0.05 as in the seed."""

Score = Callable[[Graph], float]


@dataclass(frozen=True)
class SensitivityPoint:
    layer: str
    keep: float
    score: float


def sensitivity(
    graph: Graph,
    score: Score,
    layers: Sequence[str] | None = None,
    keeps: Sequence[float] = DEFAULT_KEEPS,
) -> list[SensitivityPoint]:
    """``score`` (higher is better, e.g. validation accuracy) of the graph with only one layer pruned,
    for every layer in ``layers`` (default: every prunable layer) and keep ratio in ``keeps``."""
    names = list(layers) if layers is not None else [layer.node for layer in weight_layers(graph)]
    return [
        SensitivityPoint(name, float(keep), float(score(prune(graph, layers={name: keep}))))
        for name in names
        for keep in keeps
    ]


def top1(outputs: np.ndarray) -> np.ndarray:
    """Arg-max class per sample of a [batch, ...] score tensor."""
    scores = np.asarray(outputs)
    return scores.reshape(scores.shape[0] if scores.ndim else 1, -1).argmax(axis=1)


def agreement_score(graph: Graph, inputs: Sequence[np.ndarray], threads: int | None = 1) -> Score:
    """A score for graphs without a labelled set: the fraction of ``inputs`` whose top-1 class (of the
    first output) matches ``graph``'s own."""
    options = RuntimeOptions.resolve(threads=threads)

    def first_output(g: Graph, x: np.ndarray) -> np.ndarray:
        result = Model(g, options)(x)
        return result[0] if isinstance(result, tuple) else result

    reference = [top1(first_output(graph, x)) for x in inputs]

    def score(candidate: Graph) -> float:
        hits = [np.mean(top1(first_output(candidate, x)) == ref) for x, ref in zip(inputs, reference)]
        return float(np.mean(hits)) if hits else 1.0

    return score
