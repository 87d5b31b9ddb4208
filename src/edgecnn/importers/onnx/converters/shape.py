"""ONNX converters for shape operators; attributes that later opsets turned into inputs become
constant inputs here, so edgecnn's ops have one (the newest) form."""

from __future__ import annotations

import numpy as np

from edgecnn.importers.onnx.registry import OnnxNode, attrs_from_onnx, onnx_converter
from edgecnn.ir.dtypes import SUPPORTED_DTYPES
from edgecnn.ir.graph import Node
from edgecnn.ops import shape
from edgecnn.ops.registry import NoAttrs

PLAIN = ("Identity", "Expand", "Tile", "Range", "Size")
WITH_ATTRS = {
    "Flatten": shape.FlattenAttrs,
    "Reshape": shape.ReshapeAttrs,
    "Transpose": shape.TransposeAttrs,
    "Concat": shape.ConcatAttrs,
    "Gather": shape.GatherAttrs,
    "Shape": shape.ShapeAttrs,
    "DepthToSpace": shape.BlockAttrs,
    "SpaceToDepth": shape.BlockAttrs,
}


@onnx_converter(*PLAIN)
def convert_plain(n: OnnxNode) -> list[Node]:
    return [n.node(n.op_type, NoAttrs())]


@onnx_converter(*WITH_ATTRS)
def convert_with_attrs(n: OnnxNode) -> list[Node]:
    return [n.node(n.op_type, attrs_from_onnx(n, WITH_ATTRS[n.op_type]))]


@onnx_converter("Dropout")
def convert_dropout(n: OnnxNode) -> list[Node]:
    """Inference: the identity. Opsets < 12 had ``ratio`` as an attribute (ignored here)."""
    inputs = n.inputs if n.opset >= 12 else n.inputs[:1]
    return [n.node("Dropout", NoAttrs(), inputs)]


def _axes_input(n: OnnxNode, became_input: int) -> list[str]:
    if n.opset >= became_input:
        return n.inputs
    axes = n.attr("axes")
    if axes is None:
        return n.inputs[:1]
    return [n.inputs[0], n.add_constant(np.asarray(axes, np.int64), "axes")]


@onnx_converter("Squeeze", "Unsqueeze")
def convert_squeeze(n: OnnxNode) -> list[Node]:
    return [n.node(n.op_type, NoAttrs(), _axes_input(n, 13))]


@onnx_converter("Split")
def convert_split(n: OnnxNode) -> list[Node]:
    inputs = n.inputs
    if n.opset < 13 and n.attr("split") is not None:
        inputs = [n.inputs[0], n.add_constant(np.asarray(n.attr("split"), np.int64), "split")]
    attrs = shape.SplitAttrs(axis=int(n.attr("axis", 0)), num_outputs=len(n.outputs))
    return [n.node("Split", attrs, inputs)]


@onnx_converter("Slice")
def convert_slice(n: OnnxNode) -> list[Node]:
    if n.opset >= 10:
        return [n.node("Slice", NoAttrs())]
    inputs = [n.inputs[0]]
    for key in ("starts", "ends", "axes"):
        if n.attr(key) is not None:
            inputs.append(n.add_constant(np.asarray(n.attr(key), np.int64), key))
    return [n.node("Slice", NoAttrs(), inputs)]


@onnx_converter("Pad")
def convert_pad(n: OnnxNode) -> list[Node]:
    attrs = shape.PadAttrs(mode=str(n.attr("mode", "constant")))
    if n.opset >= 11:
        return [n.node("Pad", attrs)]
    pads = n.add_constant(np.asarray(n.attr("pads", []), np.int64), "pads")
    value = n.add_constant(np.float32(n.attr("value", 0.0)), "value")
    return [n.node("Pad", attrs, [n.inputs[0], pads, value])]


_CONSTANT_KEYS = {
    "value_float": np.float32,
    "value_floats": np.float32,
    "value_int": np.int64,
    "value_ints": np.int64,
}


@onnx_converter("Constant")
def convert_constant(n: OnnxNode) -> list[Node]:
    if n.attr("value") is not None:
        value = np.asarray(n.attr("value"))
    else:
        key = next((k for k in _CONSTANT_KEYS if n.attr(k) is not None), None)
        if key is None:
            raise ValueError(f"Constant has no supported value attribute (has {sorted(n.attributes)})")
        value = np.asarray(n.attr(key), dtype=_CONSTANT_KEYS[key])
    return [n.node("Constant", shape.ConstantAttrs(value=value))]


@onnx_converter("ConstantOfShape")
def convert_constant_of_shape(n: OnnxNode) -> list[Node]:
    value = n.attr("value")
    if value is None:
        return [n.node("ConstantOfShape", shape.ConstantOfShapeAttrs())]
    value = np.asarray(value)
    if value.dtype.name not in SUPPORTED_DTYPES:
        raise ValueError(f"value must be a numeric tensor, got {value.dtype.name}")
    if value.size != 1:
        raise ValueError(f"value must hold one element, got shape {list(value.shape)}")
    attrs = shape.ConstantOfShapeAttrs(value=value.reshape(-1)[0].item(), dtype=value.dtype.name)
    return [n.node("ConstantOfShape", attrs)]
