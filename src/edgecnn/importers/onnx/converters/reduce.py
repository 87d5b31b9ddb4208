"""ONNX converters for reductions and ArgMax/ArgMin."""

from __future__ import annotations

import numpy as np

from edgecnn.importers.onnx.registry import OnnxNode, attrs_from_onnx, onnx_converter
from edgecnn.ir.graph import Node
from edgecnn.ops.reduce import REDUCTIONS, ArgAttrs, ReduceAttrs

AXES_BECAME_INPUT = {name: 18 for name in REDUCTIONS} | {"ReduceSum": 13}
"""The opset from which each reduction takes ``axes`` as an input instead of an attribute."""


@onnx_converter(*REDUCTIONS)
def convert_reduce(n: OnnxNode) -> list[Node]:
    attrs = attrs_from_onnx(n, ReduceAttrs)
    if n.opset >= AXES_BECAME_INPUT[n.op_type]:
        return [n.node(n.op_type, attrs)]
    axes = n.attr("axes")
    inputs = [n.inputs[0]]
    if axes is not None:
        inputs.append(n.add_constant(np.asarray(axes, np.int64), "axes"))
    return [n.node(n.op_type, attrs, inputs)]


@onnx_converter("ArgMax", "ArgMin")
def convert_arg(n: OnnxNode) -> list[Node]:
    return [n.node(n.op_type, attrs_from_onnx(n, ArgAttrs))]
