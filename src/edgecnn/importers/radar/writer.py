"""Graph -> seed 003 model file, for graphs of the format's one family of networks.

The family (docs/formats/radar.md): input (N, C, L) float32; blocks Conv(1-D, valid, stride 1)
-> [AveragePool | MaxPool (no padding)] -> Relu; Flatten; Gemm -> Relu ...; Gemm -> Softmax.
Anything else raises ModelFormatError naming the first node that does not fit.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO

import numpy as np

from edgecnn.atomic import atomic_write
from edgecnn.errors import ModelFormatError
from edgecnn.importers.radar.header import (
    FLOAT,
    NO_POOLING,
    PoolKind,
    RadarLayer,
    input_lengths,
    pack_header,
    parse_header,
)
from edgecnn.importers.radar.reader import LayerParams
from edgecnn.ir.graph import Graph, Node
from edgecnn.ops.common import AutoPad
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs

_POOLS = {"AveragePool": PoolKind.AVERAGE, "MaxPool": PoolKind.MAX}


def save_radar(graph_or_model: Any, path: str | os.PathLike[str]) -> None:
    """Write a Graph (or a Model's graph) in the seed-003 format, atomically (edgecnn.atomic): a
    failed write leaves the old file as it was, and is a ModelFormatError naming ``path``."""
    graph = graph_or_model if isinstance(graph_or_model, Graph) else getattr(graph_or_model, "graph", None)
    if not isinstance(graph, Graph):
        raise TypeError(f"save_radar needs a Graph or a Model, got {type(graph_or_model).__name__}")
    layers, params = radar_layers(graph)

    def write(f: BinaryIO) -> None:
        f.write(pack_header(layers))
        for p in params:
            f.write(np.ascontiguousarray(p.weights, FLOAT).tobytes())
            f.write(np.ascontiguousarray(p.bias, FLOAT).tobytes())

    atomic_write(path, write, error=ModelFormatError, what="radar model file")


def radar_layers(graph: Graph) -> tuple[list[RadarLayer], list[LayerParams]]:
    """The header layers and parameters of ``graph``; raises ModelFormatError if it is not of the family."""
    return _ChainReader(graph).read()


def _is_default(value: tuple[int, ...], default: int) -> bool:
    return all(v == default for v in value)


class _ChainReader:
    """Walks the graph's single chain from its input, one layer block at a time."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.consumers = graph.consumers()
        self.visited: set[int] = set()

    def fail(self, node: Node | None, message: str) -> ModelFormatError:
        where = f"node {node}: " if node is not None else ""
        return ModelFormatError(
            f"cannot save graph '{self.graph.name}' in the radar format: {where}{message}"
        )

    def next_node(self, tensor: str, after: Node | None) -> Node | None:
        """The one node reading ``tensor``; None when ``tensor`` is the graph's output."""
        users = self.consumers.get(tensor, [])
        if tensor in self.graph.outputs:
            if users:
                raise self.fail(users[0], f"reads '{tensor}', which is also the graph's output")
            return None
        if len(users) != 1:
            what = (
                "nothing reads it" if not users else f"{len(users)} nodes read it (the format is one chain)"
            )
            raise self.fail(after, f"output '{tensor}': {what}")
        node = users[0]
        if node.inputs[0] != tensor or tensor in node.inputs[1:]:
            raise self.fail(node, f"'{tensor}' must be its first input and only data input")
        if len([o for o in node.outputs if o]) != 1:
            raise self.fail(node, "must have exactly one output")
        self.visited.add(id(node))
        return node

    def constant(self, node: Node, index: int) -> np.ndarray | None:
        if index >= len(node.inputs) or not node.inputs[index]:
            return None
        value = self.graph.initializers.get(node.inputs[index])
        if value is None:
            raise self.fail(node, f"input '{node.inputs[index]}' must be a constant (an initializer)")
        return np.asarray(value, np.float32)

    def read(self) -> tuple[list[RadarLayer], list[LayerParams]]:
        graph = self.graph
        data_inputs = [s for s in graph.inputs if s.name not in graph.initializers]
        if len(data_inputs) != 1 or len(graph.outputs) != 1:
            raise self.fail(
                None, f"needs one input and one output, has {len(data_inputs)} and {len(graph.outputs)}"
            )
        spec = data_inputs[0]
        shape = spec.shape or ()
        sizes = [d for d in shape[1:] if isinstance(d, int)]
        if spec.dtype != "float32" or len(shape) != 3 or len(sizes) != 2:
            raise self.fail(None, f"input {spec} must be float32 (N, channels, length) with known sizes")
        channels, length = sizes
        layers: list[RadarLayer] = []
        params: list[LayerParams] = []
        node = self.next_node(spec.name, None)
        while node is not None and node.op == "Conv":
            layer, p, node = self.conv_block(node, channels)
            new_length = layer.output_length(length)
            if new_length is None:
                raise self.fail(node, f"layer {len(layers)}: a length-{length} input is too short")
            layers.append(layer)
            params.append(p)
            channels, length = layer.out_size, new_length
        if node is not None and node.op in _POOLS:
            raise self.fail(
                node, "pooling must come between a convolution and its Relu (the format pools first)"
            )
        if node is None or node.op != "Flatten":
            raise self.fail(node, "expected Conv, or Flatten before the fully connected layers")
        if getattr(node.attrs, "axis", None) not in (1, -2):
            raise self.fail(node, "must flatten from axis 1")
        self.dense_blocks(node, channels * length, layers, params)
        stray = [n for n in graph.nodes if id(n) not in self.visited]
        if stray:
            raise self.fail(stray[0], "is not on the chain from the input to the output")
        try:  # the format's own checks, on the header this graph gives
            input_lengths(parse_header(pack_header(layers), graph.name), graph.name)
        except ModelFormatError as exc:
            raise self.fail(None, str(exc)) from None
        return layers, params

    def conv_block(self, conv: Node, channels: int) -> tuple[RadarLayer, LayerParams, Node | None]:
        attrs = conv.attrs
        weights = self.constant(conv, 1)
        if weights is None or weights.ndim != 3:
            raise self.fail(conv, "weights must be a constant (kernels, channels, length) array")
        kernels, in_channels, kernel = weights.shape
        if in_channels != channels:
            raise self.fail(conv, f"weights expect {in_channels} input channels, the input has {channels}")
        if not (
            isinstance(attrs, ConvAttrs)
            and attrs.kernel_shape in ((), (kernel,))
            and _is_default(attrs.strides, 1)
            and _is_default(attrs.pads, 0)
            and _is_default(attrs.dilations, 1)
            and attrs.group == 1
            and attrs.auto_pad in (AutoPad.NOTSET, AutoPad.VALID)
        ):
            raise self.fail(
                conv, f"only unpadded stride-1 undilated ungrouped 1-D convolutions fit, got {attrs}"
            )
        bias = self.bias(conv, 2, kernels)
        node = self.next_node(conv.outputs[0], conv)
        pool_dims = NO_POOLING
        if node is not None and node.op in _POOLS:
            pool_dims = self.pool(node)
            node = self.next_node(node.outputs[0], node)
        if node is None or node.op != "Relu":
            raise self.fail(node or conv, "a convolution (and its pooling) must be followed by Relu")
        layer = RadarLayer((kernels, in_channels, kernel), pool_dims, kernels)
        return layer, LayerParams(weights, bias), self.next_node(node.outputs[0], node)

    def pool(self, node: Node) -> tuple[int, int, int]:
        attrs = node.attrs
        fits = (
            isinstance(attrs, (AveragePoolAttrs, MaxPoolAttrs))
            and len(attrs.kernel_shape) == 1
            and len(attrs.strides) in (0, 1)
            and _is_default(attrs.pads, 0)
            and _is_default(attrs.dilations, 1)
            and not attrs.ceil_mode
            and attrs.auto_pad in (AutoPad.NOTSET, AutoPad.VALID)
        )
        if not fits:
            raise self.fail(node, f"only unpadded floor-mode 1-D pooling fits, got {attrs}")
        stride = attrs.strides[0] if attrs.strides else 1
        return (_POOLS[node.op].value, attrs.kernel_shape[0], stride)

    def bias(self, node: Node, index: int, size: int) -> np.ndarray:
        value = self.constant(node, index)
        if value is None:
            return np.zeros(size, np.float32)
        if value.size == 1 or value.shape in ((size,), (1, size)):
            return np.broadcast_to(value.reshape(-1), (size,)).copy()
        raise self.fail(node, f"bias of shape {list(value.shape)} does not fit {size} outputs")

    def dense_blocks(
        self, flatten: Node, features: int, layers: list[RadarLayer], params: list[LayerParams]
    ) -> None:
        node = self.next_node(flatten.outputs[0], flatten)
        while True:
            if node is None or node.op != "Gemm":
                raise self.fail(node or flatten, "expected Gemm (a fully connected layer)")
            gemm = node
            layer, p = self.dense(gemm, features)
            layers.append(layer)
            params.append(p)
            features = layer.out_size
            node = self.next_node(gemm.outputs[0], gemm)
            if node is not None and node.op == "Relu":
                node = self.next_node(node.outputs[0], node)
                continue
            if node is not None and node.op == "Softmax":
                if getattr(node.attrs, "axis", None) not in (1, -1):
                    raise self.fail(node, "must normalise over the features (axis 1 or -1)")
                if self.next_node(node.outputs[0], node) is not None:
                    raise self.fail(node, "must produce the graph's output")
                return
            raise self.fail(
                node or gemm, "a fully connected layer must be followed by Relu, or Softmax at the end"
            )

    def dense(self, gemm: Node, features: int) -> tuple[RadarLayer, LayerParams]:
        attrs = gemm.attrs
        b = self.constant(gemm, 1)
        if not isinstance(attrs, GemmAttrs) or attrs.trans_a or b is None or b.ndim != 2:
            raise self.fail(gemm, "needs a constant 2-D B and trans_a = 0")
        weights = b.T if attrs.trans_b else b
        if weights.shape[0] != features:
            raise self.fail(gemm, f"expects {weights.shape[0]} inputs, the previous layer gives {features}")
        outputs = weights.shape[1]
        bias = self.bias(gemm, 2, outputs)
        if attrs.alpha != 1.0:
            weights = (weights.astype(np.float64) * attrs.alpha).astype(np.float32)
        if attrs.beta != 1.0:
            bias = (bias.astype(np.float64) * attrs.beta).astype(np.float32)
        layer = RadarLayer((0, features, outputs), NO_POOLING, outputs)
        return layer, LayerParams(np.ascontiguousarray(weights), bias)
