"""Fold a per-channel affine map (x * scale + shift) that follows a convolution or dense layer
into that layer's weights and bias, so it costs nothing at run time.

Caffe's BatchNorm + Scale(bias_term) imports as BatchNormalization, Mul and Add by per-channel
constants; ``fold_batch_norm`` removes the first, this pass the others (Sub and Div by constants too).
The helpers here are the shared core: which producers can absorb an affine map, and the rewrite.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from edgecnn.ir.graph import Graph, Node
from edgecnn.ops.fused import FusedActivation
from edgecnn.ops.registry import op_family
from edgecnn.passes.base import PassResult


@dataclass(frozen=True)
class LinearLayer:
    """A Conv/Gemm with constant weights whose output channels an affine map can be folded into."""

    node: Node
    weights: np.ndarray
    bias: np.ndarray  # float64, one value per output channel (zeros when the layer has none)
    channels: int
    output_rank: int


class AffineFolder:
    """Folds per-channel affine maps into the layers before them, in one graph being rewritten;
    keeps the producer map and the taken tensor names current as layers change outputs."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.producers = graph.producers()
        self.readers = Counter(x for node in graph.nodes for x in node.inputs if x)
        self.taken = set(graph.initializers) | set(graph.input_names) | set(self.producers)

    def layer_before(self, tensor: str) -> LinearLayer | None:
        """The layer writing ``tensor`` if a per-channel map on ``tensor`` can move into its weights:
        a Conv/Gemm (or fused one without activation) with constant float weights and bias, whose
        output only the map reads and which is not a graph output."""
        graph = self.graph
        node = self.producers.get(tensor)
        if node is None or op_family(node.op) not in ("Conv", "Gemm") or node.outputs[0] != tensor:
            return None
        if isinstance(node.attrs, FusedActivation) and node.attrs.activation != "none":
            return None
        if self.readers[tensor] != 1 or tensor in graph.outputs:
            return None
        weights = graph.initializers.get(node.inputs[1]) if len(node.inputs) > 1 else None
        if weights is None or weights.dtype.kind != "f":
            return None
        bias_name = node.inputs[2] if len(node.inputs) > 2 else ""
        bias = graph.initializers.get(bias_name) if bias_name else None
        if bias_name and (bias is None or bias.dtype.kind != "f"):
            return None
        if op_family(node.op) == "Conv":
            channels = weights.shape[0]
            if weights.ndim < 3 or (bias is not None and bias.shape != (channels,)):
                return None
            vector = np.zeros(channels) if bias is None else bias.astype(np.float64)
            return LinearLayer(node, weights, vector, channels, weights.ndim)
        if weights.ndim != 2:
            return None
        channels = weights.shape[0] if node.attrs.trans_b else weights.shape[1]
        gemm_vector = gemm_bias_vector(bias, channels, node.attrs.beta)
        return None if gemm_vector is None else LinearLayer(node, weights, gemm_vector, channels, 2)

    def fold(self, layer: LinearLayer, scale: np.ndarray, shift: np.ndarray, output: str) -> None:
        """Rewrite ``layer`` in place to compute its old output * scale + shift into ``output``.
        New weights and bias get fresh initializers (computed in float64, stored in the weights'
        dtype); the old ones stay for eliminate_dead to drop when nothing else reads them."""
        node = layer.node
        if op_family(node.op) == "Conv":
            factor = scale.reshape(-1, *([1] * (layer.weights.ndim - 1)))
        else:
            factor = scale.reshape(-1, 1) if node.attrs.trans_b else scale.reshape(1, -1)
            node.attrs = replace(node.attrs, beta=1.0)  # beta is now inside the new bias
        base = node.name or node.outputs[0]
        weights_name = self._fresh_name(f"{base}.weights.folded")
        bias_name = self._fresh_name(f"{base}.bias.folded")
        dtype = layer.weights.dtype
        # float32 weights scale in float32: one rounding of w * f (f rounded once), and no float64
        # copy of every weight (ResNet-50: 0.5 s of its first inference under load)
        work = np.float32 if dtype == np.float32 else np.float64
        self.graph.initializers[weights_name] = (layer.weights * factor.astype(work)).astype(
            dtype, copy=False
        )
        self.graph.initializers[bias_name] = (layer.bias * scale + shift).astype(dtype)
        node.inputs = [node.inputs[0], weights_name, bias_name]
        node.outputs = [output]
        self.producers[output] = node

    def _fresh_name(self, base: str) -> str:
        name, index = base, 1
        while name in self.taken:
            index += 1
            name = f"{base}_{index}"
        self.taken.add(name)
        return name


def gemm_bias_vector(bias: np.ndarray | None, channels: int, beta: float) -> np.ndarray | None:
    """beta * C as one value per output column, or None when C varies over rows (shape [M, F])."""
    if bias is None:
        return np.zeros(channels)
    if bias.size == 1:
        return np.full(channels, float(bias.reshape(())) * beta)
    if bias.shape in ((channels,), (1, channels)):
        return bias.reshape(-1).astype(np.float64) * beta
    return None


def channel_vector(value: np.ndarray, output_rank: int, channels: int) -> np.ndarray | None:
    """``value`` as one float64 per channel when, broadcast against an (N, C, ...) output, it
    varies only along axis 1; None otherwise (e.g. a [C] constant on NCHW varies along W)."""
    if value.dtype.kind != "f" or value.ndim > output_rank:
        return None
    shape = (1,) * (output_rank - value.ndim) + value.shape
    if any(size != 1 for axis, size in enumerate(shape) if axis != 1) or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(value.reshape(-1).astype(np.float64), (channels,))


def _affine_of(node: Node, graph: Graph) -> tuple[str, np.ndarray] | None:
    """(data input, constant) of a Mul/Add by a constant, or of a Sub/Div of the data by one."""
    if node.op not in ("Mul", "Add", "Sub", "Div") or len(node.inputs) != 2 or len(node.outputs) != 1:
        return None
    a, b = node.inputs
    if b in graph.initializers and a not in graph.initializers:
        return a, graph.initializers[b]
    if node.op in ("Mul", "Add") and a in graph.initializers and b not in graph.initializers:
        return b, graph.initializers[a]
    return None


def _scale_and_shift(op: str, vector: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The map x -> x * scale + shift that ``op`` with constant ``vector`` applies."""
    if op == "Mul":
        return vector, np.zeros_like(vector)
    if op == "Div":
        return None if np.any(vector == 0) else (1.0 / vector, np.zeros_like(vector))
    return np.ones_like(vector), (vector if op == "Add" else -vector)


def fold_channel_affine(graph: Graph) -> PassResult:
    if not any(_affine_of(node, graph) for node in graph.nodes):
        return PassResult(graph)  # nothing to fold: no copy (the folder rewrites layers in place)
    result = graph.copy()
    folder = AffineFolder(result)
    changes = []
    kept = []
    for node in result.nodes:
        matched = _affine_of(node, result)
        layer = None if matched is None else folder.layer_before(matched[0])
        vector = (
            None
            if matched is None or layer is None
            else channel_vector(matched[1], layer.output_rank, layer.channels)
        )
        affine = None if vector is None else _scale_and_shift(node.op, vector)
        if layer is None or affine is None:
            kept.append(node)
            continue
        folder.fold(layer, *affine, output=node.outputs[0])
        changes.append(f"folded {node} into {layer.node}")
    result.nodes = kept
    return PassResult(result, changes)
