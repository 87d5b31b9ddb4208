"""ONNX converters for pooling."""

from __future__ import annotations

from edgecnn.importers.onnx.registry import OnnxNode, attrs_from_onnx, onnx_converter
from edgecnn.ir.graph import Node
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs


@onnx_converter("MaxPool")
def convert_max_pool(n: OnnxNode) -> list[Node]:
    if len(n.outputs) > 1 and n.outputs[1]:
        raise ValueError("the Indices output of MaxPool is not supported")
    return [Node("MaxPool", n.name, n.inputs, n.outputs[:1], attrs_from_onnx(n, MaxPoolAttrs))]


@onnx_converter("AveragePool")
def convert_average_pool(n: OnnxNode) -> list[Node]:
    return [n.node("AveragePool", attrs_from_onnx(n, AveragePoolAttrs))]


@onnx_converter("GlobalAveragePool", "GlobalMaxPool")
def convert_global_pool(n: OnnxNode) -> list[Node]:
    return [n.node(n.op_type, NoAttrs())]
