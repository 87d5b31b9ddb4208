"""Structured pruning: remove whole filters (Conv output channels) or neurons (Gemm/MatMul outputs)
with the smallest L1 norm, and shrink what reads them (BatchNorm parameters on the way, the next
layer's input channels or columns), so the model gets smaller and faster, not just sparser."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from edgecnn.compress.layers import WeightLayer
from edgecnn.compress.prune import keep_ratios
from edgecnn.errors import GraphError
from edgecnn.ir.graph import Graph, Node

PER_CHANNEL_OPS = frozenset(
    {
        "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "Clip", "HardSigmoid", "Identity", "Dropout",
        "MaxPool", "AveragePool", "FusedMaxPool", "FusedAveragePool", "GlobalAveragePool", "GlobalMaxPool",
        "BatchNormalization",
    }
)  # fmt: skip
"""Ops that treat channels independently: removed channels just pass through them."""
FLATTENING_OPS = frozenset({"Flatten", "Reshape"})


def unit_norms(weights: np.ndarray, out_axis: int) -> np.ndarray:
    """L1 norm of every output unit (filter or neuron)."""
    moved = np.moveaxis(np.abs(np.asarray(weights, np.float64)), out_axis, 0)
    return moved.reshape(moved.shape[0], -1).sum(axis=1)


def kept_units(weights: np.ndarray, out_axis: int, keep: float) -> np.ndarray:
    """Sorted indices of the ``round(keep * units)`` (at least one) units with the largest L1 norm."""
    norms = unit_norms(weights, out_axis)
    count = max(1, round(keep * norms.size))
    return np.sort(np.argsort(-norms, kind="stable")[:count])


def _only_reader(graph: Graph, tensor: str, owner: Node) -> Node:
    if tensor in graph.outputs:
        raise GraphError(
            f"cannot remove units of {owner}: its output reaches the graph output '{tensor}' "
            "(that would change what the model outputs)"
        )
    readers = graph.consumers().get(tensor, [])
    if len(readers) != 1:
        raise GraphError(
            f"cannot remove units of {owner}: tensor '{tensor}' has {len(readers)} readers, not one"
        )
    return readers[0]


def _own_tensor(graph: Graph, name: str, owner: Node) -> np.ndarray:
    readers = [n for n in graph.nodes if name in n.inputs]
    if len(readers) != 1 or name not in graph.initializers:
        raise GraphError(f"cannot shrink {owner}: '{name}' is not a constant read by this node alone")
    return np.asarray(graph.initializers[name])


def _shrink_producer(graph: Graph, node: Node, layer: WeightLayer, kept: np.ndarray) -> None:
    w = _own_tensor(graph, layer.tensor, node)
    if node.op == "Conv" and getattr(node.attrs, "group", 1) != 1:
        raise GraphError(f"cannot remove filters of grouped convolution {node}")
    if node.op not in ("Conv", "Gemm", "MatMul") or (node.op == "MatMul" and node.inputs[1] != layer.tensor):
        raise GraphError(f"structured pruning handles Conv, Gemm and MatMul x @ W, not {node}")
    graph.initializers[layer.tensor] = np.take(w, kept, axis=layer.out_axis)
    bias = node.inputs[2] if len(node.inputs) > 2 else ""
    if bias:
        b = _own_tensor(graph, bias, node)
        if b.ndim >= 1 and b.shape[-1] == w.shape[layer.out_axis]:
            graph.initializers[bias] = np.take(b, kept, axis=b.ndim - 1)
        elif b.size != 1:
            raise GraphError(f"cannot shrink the bias '{bias}' of shape {list(b.shape)} of {node}")


def _shrink_reader(graph: Graph, start: Node, kept: np.ndarray, units: int) -> None:
    """Follow the pruned layer's output to the layer that reads it and drop the matching inputs."""
    tensor, flattened = start.outputs[0], False
    while True:
        reader = _only_reader(graph, tensor, start)
        if reader.op in PER_CHANNEL_OPS and reader.inputs[0] == tensor:
            if reader.op == "BatchNormalization":
                for name in reader.inputs[1:5]:
                    graph.initializers[name] = _own_tensor(graph, name, reader)[kept]
            tensor = reader.outputs[0]
            continue
        if reader.op in FLATTENING_OPS and reader.inputs[0] == tensor:
            flattened, tensor = True, reader.outputs[0]
            continue
        break
    if reader.op == "Conv" and reader.inputs[0] == tensor and not flattened:
        if getattr(reader.attrs, "group", 1) != 1:
            raise GraphError(f"cannot remove filters of {start}: {reader} is a grouped convolution")
        w = _own_tensor(graph, reader.inputs[1], reader)
        graph.initializers[reader.inputs[1]] = w[:, kept]
        return
    trans_b = bool(getattr(reader.attrs, "trans_b", False))
    if (
        reader.op in ("Gemm", "MatMul")
        and reader.inputs[0] == tensor
        and not getattr(reader.attrs, "trans_a", False)
    ):
        w = _own_tensor(graph, reader.inputs[1], reader)
        if w.ndim != 2:
            raise GraphError(f"cannot shrink {reader}: its weights are not a matrix")
        axis = 1 if reader.op == "Gemm" and trans_b else 0
        width = w.shape[axis]
        if width % units:
            raise GraphError(
                f"cannot shrink {reader}: {width} inputs are not a multiple of {start}'s {units} units"
            )
        per_unit = width // units  # positions per channel after a Flatten (1 when read directly)
        columns = (kept[:, None] * per_unit + np.arange(per_unit)).reshape(-1)
        graph.initializers[reader.inputs[1]] = np.take(w, columns, axis=axis)
        return
    raise GraphError(
        f"cannot remove units of {start}: its output reaches {reader}, which structured pruning cannot follow"
    )


def prune_structured(
    graph: Graph, keep: float | None = None, layers: Mapping[str, float] | None = None
) -> tuple[Graph, dict[str, tuple[int, int]]]:
    """(smaller copy of ``graph``, {node: (units before, units after)}): each chosen Conv/Gemm/MatMul
    keeps the ``keep`` fraction of its output units with the largest L1 norm (``layers`` maps node
    or weight names to their own fraction, as in ``prune``). The input graph is not modified."""
    result = graph.copy()
    nodes = {n.name: n for n in result.nodes}
    changed: dict[str, tuple[int, int]] = {}
    for layer, ratio in keep_ratios(graph, keep, layers).items():
        node = nodes[layer.node]
        w = np.asarray(result.initializers[layer.tensor])
        units = w.shape[layer.out_axis]
        kept = kept_units(w, layer.out_axis, ratio)
        if kept.size == units:
            continue
        _shrink_reader(result, node, kept, units)  # checks the path first: nothing changes on refusal
        _shrink_producer(result, node, layer, kept)
        changed[layer.node] = (units, int(kept.size))
    return result, changed
