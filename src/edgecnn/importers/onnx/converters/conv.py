"""ONNX converters for Conv and ConvTranspose."""

from __future__ import annotations

from edgecnn.importers.onnx.registry import OnnxNode, attrs_from_onnx, onnx_converter
from edgecnn.ir.graph import Node
from edgecnn.ops.conv import ConvAttrs, ConvTransposeAttrs


@onnx_converter("Conv")
def convert_conv(n: OnnxNode) -> list[Node]:
    return [n.node("Conv", attrs_from_onnx(n, ConvAttrs))]


@onnx_converter("ConvTranspose")
def convert_conv_transpose(n: OnnxNode) -> list[Node]:
    return [n.node("ConvTranspose", attrs_from_onnx(n, ConvTransposeAttrs))]
