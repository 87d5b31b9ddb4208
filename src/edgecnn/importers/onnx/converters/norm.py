"""ONNX converters for normalisation layers."""

from __future__ import annotations

from edgecnn.importers.onnx.registry import OnnxNode, attrs_from_onnx, onnx_converter
from edgecnn.ir.graph import Node
from edgecnn.ops import norm


@onnx_converter("BatchNormalization")
def convert_batch_norm(n: OnnxNode) -> list[Node]:
    """Inference form; the running-statistics outputs of training mode are not supported."""
    if int(n.attr("training_mode", 0)) or any(n.outputs[1:]):
        raise ValueError("BatchNormalization in training mode is not supported (inference only)")
    attrs = attrs_from_onnx(n, norm.BatchNormalizationAttrs)
    return [Node("BatchNormalization", n.name, n.inputs, n.outputs[:1], attrs)]


@onnx_converter("InstanceNormalization")
def convert_instance_norm(n: OnnxNode) -> list[Node]:
    return [n.node("InstanceNormalization", attrs_from_onnx(n, norm.InstanceNormalizationAttrs))]


@onnx_converter("LayerNormalization")
def convert_layer_norm(n: OnnxNode) -> list[Node]:
    return [n.node("LayerNormalization", attrs_from_onnx(n, norm.LayerNormalizationAttrs))]


@onnx_converter("LRN")
def convert_lrn(n: OnnxNode) -> list[Node]:
    return [n.node("LRN", attrs_from_onnx(n, norm.LRNAttrs))]
