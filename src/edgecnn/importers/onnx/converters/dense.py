"""ONNX converters for Gemm and MatMul."""

from __future__ import annotations

from edgecnn.importers.onnx.registry import OnnxNode, attrs_from_onnx, onnx_converter
from edgecnn.ir.graph import Node
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.registry import NoAttrs


@onnx_converter("Gemm")
def convert_gemm(n: OnnxNode) -> list[Node]:
    return [n.node("Gemm", attrs_from_onnx(n, GemmAttrs, {"transA": "trans_a", "transB": "trans_b"}))]


@onnx_converter("MatMul")
def convert_matmul(n: OnnxNode) -> list[Node]:
    return [n.node("MatMul", NoAttrs())]
