"""Fold inference-mode BatchNormalization into the convolution or dense layer before it.

With running statistics BN is the per-channel map x * f + (bias - mean * f), f = scale / sqrt(var
+ eps), so the layer's weights scale by f and its bias moves: one node and one pass over the
activations fewer (Darknet puts BN after nearly every convolution).
"""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Graph, Node
from edgecnn.passes.base import PassResult
from edgecnn.passes.fold_channel_affine import AffineFolder


def _channel_affine(node: Node, graph: Graph, channels: int) -> tuple[np.ndarray, np.ndarray] | None:
    """BN's (factor, shift) per channel in float64, if its statistics are constants of the right
    size and every var + epsilon is positive (otherwise the unfused op's NaNs are left as they are)."""
    names = node.inputs[1:5]
    if len(names) != 4 or not all(name in graph.initializers for name in names):
        return None
    vectors = [graph.initializers[name] for name in names]
    if any(v.dtype.kind != "f" or v.size != channels for v in vectors):
        return None
    scale, bias, mean, var = (v.reshape(-1).astype(np.float64) for v in vectors)
    spread = var + node.attrs.epsilon
    if not np.all(spread > 0):
        return None
    factor = scale / np.sqrt(spread)
    return factor, bias - mean * factor


def fold_batch_norm(graph: Graph) -> PassResult:
    if not any(node.op == "BatchNormalization" for node in graph.nodes):
        return PassResult(graph)  # nothing to fold: no copy (the folder rewrites layers in place)
    result = graph.copy()
    folder = AffineFolder(result)
    changes = []
    kept = []
    for node in result.nodes:
        single_output = len([o for o in node.outputs if o]) == 1 and bool(node.outputs[0])
        layer = None
        if node.op == "BatchNormalization" and single_output and node.inputs:
            layer = folder.layer_before(node.inputs[0])
        affine = None if layer is None else _channel_affine(node, result, layer.channels)
        if layer is None or affine is None:
            kept.append(node)
            continue
        folder.fold(layer, *affine, output=node.outputs[0])
        changes.append(f"folded {node} into {layer.node}")
    result.nodes = kept
    return PassResult(result, changes)
