"""ONNX converters for activation functions."""

from __future__ import annotations

from edgecnn.importers.onnx.registry import OnnxNode, onnx_converter
from edgecnn.ir.graph import Node
from edgecnn.ops.activation import LeakyReluAttrs
from edgecnn.ops.registry import NoAttrs


@onnx_converter("Relu")
def convert_relu(n: OnnxNode) -> list[Node]:
    return [n.node("Relu", NoAttrs())]


@onnx_converter("LeakyRelu")
def convert_leaky_relu(n: OnnxNode) -> list[Node]:
    return [n.node("LeakyRelu", LeakyReluAttrs(alpha=float(n.attr("alpha", 0.01))))]
