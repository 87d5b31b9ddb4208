"""ONNX converters for Resize (opsets 10-19) and Upsample (opsets 7-9)."""

from __future__ import annotations

import dataclasses

import numpy as np

from edgecnn.importers.onnx.registry import OnnxNode, attrs_from_onnx, onnx_converter
from edgecnn.ir.graph import Node
from edgecnn.ops.resize import ResizeAttrs

LEGACY = ResizeAttrs(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
"""Upsample and Resize-10 sampled at x_out / scale and took the floor for nearest."""


def _mode(n: OnnxNode) -> str:
    mode = str(n.attr("mode", "nearest"))
    return "linear" if mode == "bilinear" else mode


@onnx_converter("Resize")
def convert_resize(n: OnnxNode) -> list[Node]:
    if int(n.attr("antialias", 0)):
        raise ValueError("Resize with antialias=1 is not supported")
    if n.opset < 11:  # inputs were (X, scales)
        attrs = dataclasses.replace(LEGACY, mode=_mode(n))
        return [n.node("Resize", attrs, [n.inputs[0], "", n.inputs[1]])]
    return [n.node("Resize", attrs_from_onnx(n, ResizeAttrs, mode=_mode(n)))]


@onnx_converter("Upsample")
def convert_upsample(n: OnnxNode) -> list[Node]:
    attrs = dataclasses.replace(LEGACY, mode=_mode(n))
    if n.opset < 9:
        scales = n.add_constant(np.asarray(n.attr("scales"), np.float32), "scales")
        return [n.node("Resize", attrs, [n.inputs[0], "", scales])]
    return [n.node("Resize", attrs, [n.inputs[0], "", n.inputs[1]])]
