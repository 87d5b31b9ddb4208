"""Which tensors are a layer's weights, and along which axis its output channels run.

Pruning and quantisation act on these only: the constant weight operand of Conv, ConvTranspose,
Gemm and MatMul (and their fused forms). Biases, BatchNorm statistics and the like stay as they are:
they are small, and quantising them costs accuracy for no saving.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import Graph, Node

CONV_OPS = ("Conv", "FusedConv")
GEMM_OPS = ("Gemm", "FusedGemm")


@dataclass(frozen=True)
class WeightLayer:
    """Node ``node`` (an ``op``) reads the initializer ``tensor`` as its weights; ``out_axis`` is the
    tensor axis of its output channels (one int8 scale per index of it)."""

    node: str
    op: str
    tensor: str
    out_axis: int


def _weight_of(node: Node, graph: Graph) -> tuple[str, int] | None:
    inits = graph.initializers
    second = node.inputs[1] if len(node.inputs) > 1 else ""
    if node.op in CONV_OPS and second in inits:
        return second, 0  # [M, C/group, kH, kW]
    if node.op == "ConvTranspose" and second in inits:
        return second, 1 if np.ndim(inits[second]) > 1 else 0  # [C, M/group, kH, kW]
    if node.op in GEMM_OPS and second in inits and np.ndim(inits[second]) == 2:
        return second, 0 if getattr(node.attrs, "trans_b", False) else 1  # B is [N, K] or [K, N]
    if node.op == "MatMul":
        if second in inits and np.ndim(inits[second]) >= 1:
            return second, max(np.ndim(inits[second]) - 1, 0)  # x @ W: W's last axis is the output
        first = node.inputs[0]
        if first in inits and np.ndim(inits[first]) >= 1:
            return first, max(np.ndim(inits[first]) - 2, 0)  # W @ x: W's rows are the output
    return None


def weight_layers(graph: Graph) -> list[WeightLayer]:
    """Every layer with floating-point constant weights, in node order (a shared tensor is listed once)."""
    layers, seen = [], set()
    for i, node in enumerate(graph.nodes):
        found = _weight_of(node, graph)
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
