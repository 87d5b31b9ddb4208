"""Fold inference-mode BatchNormalization into the convolution or dense layer before it.

With running statistics BN is the per-channel map x * f + (bias - mean * f), f = scale / sqrt(var
+ eps), so the layer's weights scale by f and its bias moves: one node and one pass over the
activations fewer (Darknet puts BN after nearly every convolution).
"""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Graph, Node
from edgecnn.passes.base import PassResult
from edgecnn.passes.fold_channel_affine import fold_affine, linear_producer, reader_counts


def _statistics(node: Node, graph: Graph, channels: int) -> list[np.ndarray] | None:
    """scale, bias, mean, var as float64 vectors of ``channels`` values, if all are constants."""
    names = node.inputs[1:5]
    if len(names) != 4 or not all(name in graph.initializers for name in names):
        return None
    vectors = [graph.initializers[name] for name in names]
    if any(v.dtype.kind != "f" or v.size != channels for v in vectors):
        return None
    return [v.reshape(-1).astype(np.float64) for v in vectors]


def fold_batch_norm(graph: Graph) -> PassResult:
    result = graph.copy()
    producers = result.producers()
    readers = reader_counts(result)
    changes = []
    kept = []
    for node in result.nodes:
        single_output = len([o for o in node.outputs if o]) == 1 and bool(node.outputs[0])
        layer = None
        if node.op == "BatchNormalization" and single_output and node.inputs:
            layer = linear_producer(result, node.inputs[0], producers, readers)
        stats = None if layer is None else _statistics(node, result, layer.channels)
        if layer is None or stats is None:
            kept.append(node)
            continue
        scale, bias, mean, var = stats
        factor = scale / np.sqrt(var + node.attrs.epsilon)
        fold_affine(result, layer, factor, bias - mean * factor, output=node.outputs[0])
        producers[node.outputs[0]] = layer.node
        changes.append(f"folded {node} into {layer.node}")
    result.nodes = kept
    return PassResult(result, changes)
