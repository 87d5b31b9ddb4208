"""ONNX converters for activation functions and the softmax family."""

from __future__ import annotations

import numpy as np

from edgecnn.importers.onnx.registry import OnnxNode, attrs_from_onnx, onnx_converter
from edgecnn.ir.graph import Node
from edgecnn.ops import activation
from edgecnn.ops.registry import NoAttrs

WITH_ATTRS = {
    "LeakyRelu": activation.LeakyReluAttrs,
    "Elu": activation.AlphaAttrs,
    "Celu": activation.AlphaAttrs,
    "ThresholdedRelu": activation.AlphaAttrs,
    "Selu": activation.SeluAttrs,
    "HardSigmoid": activation.HardSigmoidAttrs,
    "Gelu": activation.GeluAttrs,
}


@onnx_converter("Relu", "PRelu", *activation.UNARY_ACTIVATIONS)
def convert_plain(n: OnnxNode) -> list[Node]:
    return [n.node(n.op_type, NoAttrs())]


@onnx_converter(*WITH_ATTRS)
def convert_with_attrs(n: OnnxNode) -> list[Node]:
    return [n.node(n.op_type, attrs_from_onnx(n, WITH_ATTRS[n.op_type]))]


@onnx_converter("Clip")
def convert_clip(n: OnnxNode) -> list[Node]:
    """Opsets < 11 gave the bounds as attributes; later ones as optional inputs."""
    if n.opset >= 11:
        return [n.node("Clip", NoAttrs())]
    low = n.add_constant(np.float32(n.attr("min", -np.inf)), "min")
    high = n.add_constant(np.float32(n.attr("max", np.inf)), "max")
    return [n.node("Clip", NoAttrs(), [n.inputs[0], low, high])]


@onnx_converter("Softmax", "LogSoftmax", "Hardmax")
def convert_softmax(n: OnnxNode) -> list[Node]:
    """Before opset 13 these flattened the input to 2-D at ``axis`` (default 1)."""
    legacy = n.opset < 13
    axis = int(n.attr("axis", 1 if legacy else -1))
    return [n.node(n.op_type, activation.SoftmaxAttrs(axis=axis, coerce_2d=legacy))]
