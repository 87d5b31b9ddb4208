"""ONNX converters for elementwise operators, Where and Cast."""

from __future__ import annotations

from edgecnn.importers.onnx.dtypes import numpy_dtype_of
from edgecnn.importers.onnx.registry import OnnxNode, attrs_from_onnx, onnx_converter
from edgecnn.ir.graph import Node
from edgecnn.ops import elementwise
from edgecnn.ops.registry import NoAttrs

PLAIN = (
    *elementwise.BINARY,
    *elementwise.COMPARISONS,
    *elementwise.VARIADIC,
    *elementwise.UNARY,
    "Pow",
    "Where",
    "CastLike",
)


@onnx_converter(*PLAIN)
def convert_plain(n: OnnxNode) -> list[Node]:
    return [n.node(n.op_type, NoAttrs())]


@onnx_converter("Mod")
def convert_mod(n: OnnxNode) -> list[Node]:
    return [n.node("Mod", attrs_from_onnx(n, elementwise.ModAttrs))]


@onnx_converter("Cast")
def convert_cast(n: OnnxNode) -> list[Node]:
    return [n.node("Cast", elementwise.CastAttrs(to=numpy_dtype_of(int(n.attr("to")), f"Cast {n.name}")))]
