"""Magnitude pruning (seed 001 §3.3, after Han et al. 2015): keep the KEEP fraction of a layer's
weights with the largest |w| and set the rest to zero. Retraining afterwards is issue 5's training
part; this is the one-shot step it starts from."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from edgecnn.compress.layers import WeightLayer, weight_layers
from edgecnn.errors import InputError
from edgecnn.ir.graph import Graph


def magnitude_mask(weights: np.ndarray, keep: float) -> np.ndarray:
    """Boolean mask of the ``round(keep * size)`` entries with the largest |w| (NaN counts as largest)."""
    flat = np.abs(np.asarray(weights)).reshape(-1)
    kept = round(float(keep) * flat.size)
    mask = np.zeros(flat.size, bool)
    if kept >= flat.size:
        mask[:] = True
    elif kept > 0:
        mask[np.argpartition(flat, flat.size - kept)[flat.size - kept :]] = True
    return mask.reshape(np.shape(weights))


def check_keep(keep: float, what: str) -> float:
    if not isinstance(keep, (int, float)) or isinstance(keep, bool) or not 0.0 <= keep <= 1.0:
        raise InputError(f"{what}: the keep ratio must be a number in 0..1, got {keep!r}")
    return float(keep)


def keep_ratios(
    graph: Graph, keep: float | None, layers: Mapping[str, float] | None
) -> dict[WeightLayer, float]:
    """The keep ratio of every weight layer that is pruned: ``layers`` (by node or weight tensor
    name) overrides ``keep``; layers with neither are left alone."""
    candidates = weight_layers(graph)
    overrides = dict(layers or {})
    by_name = {name: layer for layer in candidates for name in (layer.node, layer.tensor)}
    unknown = sorted(set(overrides) - set(by_name))
    if unknown:
        names = ", ".join(layer.node for layer in candidates) or "none"
        raise InputError(
            f"no prunable layer named {', '.join(map(repr, unknown))} in graph '{graph.name}' "
            f"(prunable layers: {names})"
        )
    ratios: dict[WeightLayer, float] = {}
    if keep is not None:
        check_keep(keep, "prune")
        ratios = dict.fromkeys(candidates, float(keep))
    for name, ratio in overrides.items():
        ratios[by_name[name]] = check_keep(ratio, f"prune {name}")
    return ratios


def prune(graph: Graph, keep: float | None = None, layers: Mapping[str, float] | None = None) -> Graph:
    """A copy of ``graph`` whose Conv/Gemm/MatMul weights keep only their largest-magnitude entries.

    ``keep`` applies to every such layer; ``layers`` maps node (or weight tensor) names to their own
    ratio. The input graph and its arrays are not modified.
    """
    result = graph.copy()
    for layer, ratio in keep_ratios(graph, keep, layers).items():
        weights = np.asarray(graph.initializers[layer.tensor])
        if ratio < 1.0:
            pruned = np.where(magnitude_mask(weights, ratio), weights, np.zeros((), weights.dtype))
            result.initializers[layer.tensor] = pruned.astype(weights.dtype, copy=False)
    return result
