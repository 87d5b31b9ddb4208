"""Which tensors are a layer's weights, and along which axis its output channels run.

Pruning and quantisation act on these only: the constant weight operand that an op declares (its
``weight`` trait: Conv, ConvTranspose, Gemm, MatMul and their fused forms). Biases, BatchNorm
statistics and the like stay as they are: they are small, and quantising them costs accuracy for
no saving.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import Graph
from edgecnn.ops.traits import weight_of


@dataclass(frozen=True)
class WeightLayer:
    """Node ``node`` (an ``op``) reads the initializer ``tensor`` as its weights; ``out_axis`` is the
    tensor axis of its output channels (one int8 scale per index of it)."""

    node: str
    op: str
    tensor: str
    out_axis: int


def weight_layers(graph: Graph) -> list[WeightLayer]:
    """Every layer with floating-point constant weights, in node order (a shared tensor is listed once)."""
    layers, seen = [], set()
    for i, node in enumerate(graph.nodes):
        found = weight_of(node, graph.initializers)
        if found is None or found[0] in seen:
            continue
        tensor, axis = found
        if np.asarray(graph.initializers[tensor]).dtype.kind != "f":
            continue
        seen.add(tensor)
        layers.append(WeightLayer(node.name or f"node{i}", node.op, tensor, axis))
    return layers


def density(array: np.ndarray) -> float:
    """Fraction of non-zero entries (1.0 for an empty array: nothing was pruned)."""
    array = np.asarray(array)
    return float(np.count_nonzero(array)) / array.size if array.size else 1.0
