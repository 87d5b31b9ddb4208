"""Converters for TFLite's dense, elementwise, activation, normalisation and type operators.

Quantised operands are computed on in the real domain (DequantizeLinear -> float op ->
QuantizeLinear); the QDQ folding pass turns the dense layers into edgecnn's integer operators."""

from __future__ import annotations

from edgecnn.importers.tflite.builder import NCHW, NHWC, TO_NCHW, ConversionError, GraphBuilder
from edgecnn.importers.tflite.converters.common import (
    broadcast_constant,
    converts,
    emit,
    fused_activation,
    inputs,
    option,
    output,
    real_value,
)
from edgecnn.importers.tflite.reader import TfliteOperator
from edgecnn.ops.activation import LeakyReluAttrs, SoftmaxAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.elementwise import CastAttrs
from edgecnn.ops.reduce import ReduceAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import ReshapeAttrs, TransposeAttrs

BINARY = {"ADD": "Add", "SUB": "Sub", "MUL": "Mul", "DIV": "Div", "MAXIMUM": "Max", "MINIMUM": "Min"}
UNARY = {"RELU": "Relu", "LOGISTIC": "Sigmoid", "TANH": "Tanh", "HARD_SWISH": "HardSwish"}
CLIPS = {"RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}
L2_EPSILON = 1e-6
"""TFLite's L2_NORMALIZATION divides by max(norm, 1e-6)."""


def _operand(b: GraphBuilder, index: int, layout: str) -> str:
    if b.tensor(index).data is not None:
        return broadcast_constant(b, index, layout, 4)
    return b.get(index, layout)


def static_shape(b: GraphBuilder, index: int) -> list[int]:
    """The tensor's shape as a Reshape target: -1 for its one dynamic dimension."""
    dims = [-1 if d is None else int(d) for d in b.dims(index)]
    if dims.count(-1) > 1:
        raise ConversionError(f"tensor '{b.tensor(index).name}' has more than one dynamic dimension")
    return dims


@converts(*BINARY)
def binary(b: GraphBuilder, op: TfliteOperator) -> None:
    a, c = inputs(op, 2)
    layout = b.layout_of(a, c)
    emit(
        b,
        BINARY[op.opcode],
        NoAttrs(),
        [_operand(b, a, layout), _operand(b, c, layout)],
        output(op),
        layout,
        fused_activation(op),
    )


@converts(*UNARY, *CLIPS, "LEAKY_RELU")
def unary(b: GraphBuilder, op: TfliteOperator) -> None:
    (x,) = inputs(op, 1)
    layout = b.layout_of(x)
    args = [b.get(x, layout)]
    if op.opcode in CLIPS:
        low, high = CLIPS[op.opcode]
        emit(
            b,
            "Clip",
            NoAttrs(),
            [*args, b.constant(low, "min"), b.constant(high, "max")],
            output(op),
            layout,
            0,
        )
    elif op.opcode == "LEAKY_RELU":
        emit(
            b, "LeakyRelu", LeakyReluAttrs(alpha=float(option(op, "Alpha", 0.0))), args, output(op), layout, 0
        )
    else:
        emit(b, UNARY[op.opcode], NoAttrs(), args, output(op), layout, 0)


@converts("PRELU")
def prelu(b: GraphBuilder, op: TfliteOperator) -> None:
    x, alpha = inputs(op, 2)
    layout = b.layout_of(x)
    emit(b, "PRelu", NoAttrs(), [b.get(x, layout), _operand(b, alpha, layout)], output(op), layout, 0)


def _last_axis(b: GraphBuilder, x: int, layout: str) -> int:
    return 1 if layout == NCHW else b.rank(x) - 1


@converts("SOFTMAX", "LOG_SOFTMAX")
def softmax(b: GraphBuilder, op: TfliteOperator) -> None:
    (x,) = inputs(op, 1)
    layout = b.layout_of(x)
    source = b.get(x, layout)
    beta = float(option(op, "Beta", 1.0))
    if op.opcode == "SOFTMAX" and beta != 1.0:
        scaled = f"{source}::times_beta"
        b.node("Mul", NoAttrs(), [source, b.constant(beta, "beta")], [scaled])
        source = scaled
    op_name = "Softmax" if op.opcode == "SOFTMAX" else "LogSoftmax"
    emit(b, op_name, SoftmaxAttrs(axis=_last_axis(b, x, layout)), [source], output(op), layout, 0)


@converts("L2_NORMALIZATION")
def l2_normalization(b: GraphBuilder, op: TfliteOperator) -> None:
    (x,) = inputs(op, 1)
    layout = b.layout_of(x)
    source = b.get(x, layout)
    axes = b.constant([_last_axis(b, x, layout)], "axes", "int64")
    norm, clamped = f"{b.current}::norm", f"{b.current}::norm_clamped"
    b.node("ReduceL2", ReduceAttrs(keepdims=True), [source, axes], [norm])
    b.node("Max", NoAttrs(), [norm, b.constant(L2_EPSILON, "epsilon")], [clamped])
    emit(b, "Div", NoAttrs(), [source, clamped], output(op), layout, fused_activation(op))


@converts("FULLY_CONNECTED")
def fully_connected(b: GraphBuilder, op: TfliteOperator) -> None:
    x, w, bias = inputs(op, 3)
    y = output(op)
    weights = b.tensor(w).shape
    if len(weights) != 2:
        raise ConversionError(f"weights of shape {list(weights)} are not 2-D")
    source = b.get(x, NHWC)
    if b.rank(x) != 2 or b.tensor(x).shape[-1] != weights[1]:
        flat = f"{b.current}::flat"
        b.node(
            "Reshape", ReshapeAttrs(), [source, b.constant([-1, weights[1]], "flat_shape", "int64")], [flat]
        )
        source = flat
    args = [source, b.get(w, NHWC)] + ([b.get(bias, NHWC)] if bias >= 0 else [])
    attrs = GemmAttrs(trans_b=True)
    if b.rank(y) == 2:
        emit(b, "Gemm", attrs, args, y, NHWC, fused_activation(op))
        return
    product = f"{b.current}::product"
    b.node("Gemm", attrs, args, [product])
    shape = b.constant(static_shape(b, y), "shape", "int64")
    emit(b, "Reshape", ReshapeAttrs(), [product, shape], y, NHWC, fused_activation(op))


@converts("BATCH_MATMUL")
def batch_matmul(b: GraphBuilder, op: TfliteOperator) -> None:
    x, z = inputs(op, 2)
    args = []
    for index, adjoint in ((x, option(op, "AdjX", False)), (z, option(op, "AdjY", False))):
        name = b.get(index, NHWC)
        if adjoint:
            rank = b.rank(index)
            perm = (*range(rank - 2), rank - 1, rank - 2)
            b.node("Transpose", TransposeAttrs(perm=perm), [name], [f"{name}::adjoint"])
            name = f"{name}::adjoint"
        args.append(name)
    emit(b, "MatMul", NoAttrs(), args, output(op), NHWC, 0)


@converts("DEQUANTIZE")
def dequantize(b: GraphBuilder, op: TfliteOperator) -> None:
    (x,) = inputs(op, 1)
    y = output(op)
    if b.tensor(x).data is not None:  # fp16 or int8 weights: dequantised once, at import
        b.fold(y, real_value(b, x))
        return
    if not b.quantized(x):
        raise ConversionError(f"input '{b.tensor(x).name}' is neither quantised nor a constant")
    layout = b.layout_of(x)
    stored = b.get(x, layout, real=False)
    b.dequantize(x, stored, TO_NCHW if layout == NCHW else None, target=b.put(y, layout))


@converts("QUANTIZE")
def quantize(b: GraphBuilder, op: TfliteOperator) -> None:
    (x,) = inputs(op, 1)
    y = output(op)
    if not b.quantized(y):
        raise ConversionError(f"output '{b.tensor(y).name}' has no quantisation parameters")
    layout = b.layout_of(x)
    b.quantize(y, b.get(x, layout), b.put(y, layout, real=False), layout)


@converts("CAST")
def cast(b: GraphBuilder, op: TfliteOperator) -> None:
    (x,) = inputs(op, 1)
    y = output(op)
    layout = b.layout_of(x)
    target = b.put(y, layout, real=False)
    b.node("Cast", CastAttrs(to=b.tensor(y).dtype), [b.get(x, layout, real=False)], [target])
