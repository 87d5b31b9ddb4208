"""ONNX converters for the quantised operators (QDQ and QOperator models, e.g. from
onnxruntime.quantization): QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearConv,
QLinearMatMul, ConvInteger, MatMulInteger."""

from __future__ import annotations

from edgecnn.importers.onnx.dtypes import numpy_dtype_of
from edgecnn.importers.onnx.registry import OnnxNode, attrs_from_onnx, onnx_converter
from edgecnn.ir.graph import Node
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.quant import LINEAR_DTYPES, QuantizeAttrs
from edgecnn.ops.registry import NoAttrs


def _quantize_attrs(n: OnnxNode) -> QuantizeAttrs:
    block_size = int(n.attr("block_size", 0))
    if block_size < 0:
        raise ValueError(f"block_size must be >= 0, got {block_size}")
    output_dtype = ""
    code = int(n.attr("output_dtype", 0))
    if code:
        output_dtype = numpy_dtype_of(code, f"node '{n.name}' attribute output_dtype")
        if output_dtype not in LINEAR_DTYPES:
            raise ValueError(f"output_dtype {output_dtype} is not supported ({', '.join(LINEAR_DTYPES)})")
    return QuantizeAttrs(axis=int(n.attr("axis", 1)), output_dtype=output_dtype, block_size=block_size)


@onnx_converter("QuantizeLinear", "DequantizeLinear")
def convert_quantize(n: OnnxNode) -> list[Node]:
    return [n.node(n.op_type, _quantize_attrs(n))]


@onnx_converter("QLinearConv", "ConvInteger")
def convert_qlinear_conv(n: OnnxNode) -> list[Node]:
    return [n.node(n.op_type, attrs_from_onnx(n, ConvAttrs))]


@onnx_converter("DynamicQuantizeLinear")
def convert_dynamic_quantize(n: OnnxNode) -> list[Node]:
    return [n.node(n.op_type, NoAttrs())]


@onnx_converter("QLinearMatMul", "MatMulInteger")
def convert_qlinear_matmul(n: OnnxNode) -> list[Node]:
    return [n.node(n.op_type, NoAttrs())]
