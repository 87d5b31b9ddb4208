"""Quantised operators (ONNX opset-21 semantics): QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger; and edgecnn's ``Int8Conv``/``Int8Gemm``, the int8 layers
that edgecnn.compress.int8 writes (a QLinear layer that may read float input, quantising it on the
way in, may write float output, and applies a fused activation).

Requantisation follows onnxruntime: the int32 accumulator times the float32 multiplier
``x_scale * w_scale / y_scale``, rounded half to even, plus the output zero point, saturated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import DTypeLike

from edgecnn.ir.graph import Shape, TensorType
from edgecnn.ops.activation import LeakyReluAttrs, leaky_relu
from edgecnn.ops.common import broadcast_shapes, check, first_type, input_type, normalize_axis
from edgecnn.ops.conv import ConvAttrs, conv, infer_conv
from edgecnn.ops.fused import FusedConvAttrs, FusedGemmAttrs
from edgecnn.ops.norm import LRNAttrs, infer_lrn, lrn
from edgecnn.ops.pool import AveragePoolAttrs, infer_pool, pool_geometry
from edgecnn.ops.registry import NoAttrs, register_op
from edgecnn.ops.shape import ConcatAttrs, infer_concat
from edgecnn.ops.traits import conv_macs, gemm_macs, matmul_macs

QUANT_DTYPES = ("int8", "uint8")
"""Element types of the integer convolutions and products (and of edgecnn's int8 layers)."""
LINEAR_DTYPES = (*QUANT_DTYPES, "int16", "uint16")
"""Element types QuantizeLinear may produce and DequantizeLinear may read."""


@dataclass(frozen=True)
class QuantizeAttrs:
    """``axis``: the channel axis of per-axis scales; ``block_size`` > 0: one scale per block of that
    many elements along ``axis`` (scales then have the input's rank); ``output_dtype``: "" = the zero
    point's type (uint8 without one)."""

    axis: int = 1
    output_dtype: str = ""
    block_size: int = 0


def _limits(dtype: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def saturate(values: np.ndarray, dtype: DTypeLike) -> np.ndarray:
    """Round half to even and clamp into ``dtype``'s range (ONNX QuantizeLinear's saturation)."""
    lo, hi = _limits(np.dtype(dtype))
    return np.clip(np.rint(values), lo, hi).astype(dtype)


def per_axis(param: np.ndarray, rank: int, axis: int) -> np.ndarray:
    """A scale or zero point shaped to broadcast along ``axis`` (scalars stay scalars)."""
    param = np.asarray(param)
    if param.ndim == 0:
        return param
    if param.ndim == 1 and param.size == 1:
        # Exporters write per-tensor parameters as shape [1] with the default axis, even on 1-D
        # tensors (a bias): that is a scalar, not an axis.
        return param.reshape(())
    shape = [1] * rank
    shape[normalize_axis(axis, rank)] = param.size
    return param.reshape(shape)


def expand_param(param: np.ndarray, shape: tuple[int, ...], attrs: QuantizeAttrs) -> np.ndarray:
    """A scale or zero point broadcastable against an input of ``shape``: per tensor, per axis, or
    per block along the axis (each value repeated ``block_size`` times, the last block cut short)."""
    param = np.asarray(param)
    if param.ndim == 0 or not attrs.block_size:
        return per_axis(param, len(shape), attrs.axis)
    axis = normalize_axis(attrs.axis, len(shape))
    check(param.ndim == len(shape), f"blocked scales must have the input's rank {len(shape)}")
    repeated = np.repeat(param, attrs.block_size, axis=axis)
    check(
        repeated.shape[axis] >= shape[axis], f"{param.shape[axis]} blocks do not cover {shape[axis]} values"
    )
    return np.take(repeated, np.arange(shape[axis]), axis=axis)


def _quant_dtype(attrs: QuantizeAttrs, zero_point: TensorType | None) -> str:
    if attrs.output_dtype:
        return attrs.output_dtype
    return zero_point.dtype if zero_point is not None else "uint8"


def infer_quantize(
    attrs: QuantizeAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    x = first_type(types)
    dtype = _quant_dtype(attrs, types[2] if len(types) > 2 else None)
    check(dtype in LINEAR_DTYPES, f"quantised type must be one of {', '.join(LINEAR_DTYPES)}, got {dtype}")
    return [TensorType(dtype, x.shape)]


@register_op("QuantizeLinear", attrs=QuantizeAttrs, infer=infer_quantize, inputs=(2, 3))
def quantize_linear(
    attrs: QuantizeAttrs, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None
) -> np.ndarray:
    """y = saturate(round(x / scale) + zero_point), per tensor or per ``axis``."""
    dtype = attrs.output_dtype or (zero_point.dtype.name if zero_point is not None else "uint8")
    s = expand_param(np.asarray(scale, dtype=np.float32), x.shape, attrs)
    zp = 0 if zero_point is None else expand_param(zero_point, x.shape, attrs).astype(np.float32)
    return saturate(np.rint(x.astype(np.float32) / s) + zp, dtype)


def infer_dequantize(
    attrs: QuantizeAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    x = first_type(types)
    scale = types[1]
    return [TensorType(scale.dtype if scale is not None else "float32", x.shape)]


@register_op("DequantizeLinear", attrs=QuantizeAttrs, infer=infer_dequantize, inputs=(2, 3))
def dequantize_linear(
    attrs: QuantizeAttrs, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None
) -> np.ndarray:
    """y = (x - zero_point) * scale, per tensor or per ``axis``."""
    s = expand_param(scale, x.shape, attrs)
    zp = 0 if zero_point is None else expand_param(zero_point, x.shape, attrs).astype(np.int32)
    return ((x.astype(np.int32) - zp).astype(np.float32) * s).astype(scale.dtype)


def infer_dynamic_quantize(
    attrs: NoAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    x = first_type(types)
    return [TensorType("uint8", x.shape), TensorType("float32", ()), TensorType("uint8", ())]


@register_op("DynamicQuantizeLinear", infer=infer_dynamic_quantize, outputs=3)
def dynamic_quantize_linear(attrs: NoAttrs, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """uint8 over [min(x, 0), max(x, 0)] of this very input: (y, scale, zero point)."""
    low = np.minimum(np.float32(0), np.min(x)) if x.size else np.float32(0)
    high = np.maximum(np.float32(0), np.max(x)) if x.size else np.float32(0)
    scale = np.float32((high - low) / np.float32(255))
    zero_point = saturate(np.asarray(np.float32(0) - low / scale), np.uint8)
    y = saturate(np.rint(x.astype(np.float32) / scale) + np.float32(zero_point), np.uint8)
    return y, np.asarray(scale, dtype=np.float32), zero_point


# ------------------------------------------------------------------ integer convolution and products


def centered(q: np.ndarray, zero_point: np.ndarray | None, axis: int | None = None) -> np.ndarray:
    """q - zero_point as float64, exact for 8-bit values, so float matmuls give exact int sums."""
    zp = np.asarray(0.0 if zero_point is None else zero_point, dtype=np.float64)
    if axis is not None and zp.ndim == 1 and zp.size > 1:
        zp = per_axis(zp, q.ndim, axis)
    return q.astype(np.float64) - zp


def integer_conv(
    attrs: ConvAttrs, x: np.ndarray, x_zp: np.ndarray | None, w: np.ndarray, w_zp: np.ndarray | None
) -> np.ndarray:
    """Exact int32 sum of (x - x_zp) * (w - w_zp) over each window; padding reads x_zp (real zero)."""
    xc = centered(x, x_zp)
    wc = centered(w, w_zp, axis=0)
    return conv(attrs, xc, wc).astype(np.int64)


def requantize(
    acc: np.ndarray,
    x_scale: np.ndarray,
    w_scale: np.ndarray,
    y_scale: np.ndarray,
    y_zp: np.ndarray | None,
    axis: int,
) -> np.ndarray:
    """int32 accumulators -> quantised output: round(acc * (xs * ws / ys)) + yzp, saturated."""
    multiplier = output_multiplier(x_scale, w_scale, y_scale)
    m = per_axis(multiplier, acc.ndim, axis) if multiplier.size > 1 else multiplier.reshape(())
    y = np.rint(acc.astype(np.float32) * m)
    dtype = y_zp.dtype if y_zp is not None else np.dtype(np.uint8)
    zp = 0 if y_zp is None else np.float32(np.asarray(y_zp).reshape(()))
    return saturate(y + zp, dtype)


def output_multiplier(x_scale: np.ndarray, w_scale: np.ndarray, y_scale: np.ndarray | None) -> np.ndarray:
    """float32 xs * ws / ys per output channel (ys omitted: the dequantising multiplier xs * ws)."""
    m = np.float32(np.asarray(x_scale).reshape(())) * np.asarray(w_scale, dtype=np.float32).reshape(-1)
    if y_scale is not None:
        m = m / np.float32(np.asarray(y_scale).reshape(()))
    return m.astype(np.float32)


def infer_qlinear_conv(
    attrs: ConvAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    x, w = first_type(types), types[3]
    check(w is not None, "weights are required")
    assert w is not None
    check(w.dtype in QUANT_DTYPES, f"weights must be int8 or uint8, got {w.dtype}")
    shape = infer_conv(attrs, [x, w], values)[0].shape
    y_zp = types[7] if len(types) > 7 else None
    return [TensorType(y_zp.dtype if y_zp is not None else "uint8", shape)]


@register_op("QLinearConv", attrs=ConvAttrs, infer=infer_qlinear_conv, inputs=(8, 9), macs=conv_macs(3))
def qlinear_conv(
    attrs: ConvAttrs,
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zp: np.ndarray | None,
    w: np.ndarray,
    w_scale: np.ndarray,
    w_zp: np.ndarray | None,
    y_scale: np.ndarray,
    y_zp: np.ndarray | None,
    b: np.ndarray | None = None,
) -> np.ndarray:
    acc = integer_conv(attrs, x, x_zp, w, w_zp)
    if b is not None:
        acc = acc + b.astype(np.int64).reshape(-1, *([1] * (acc.ndim - 2)))
    return requantize(acc, x_scale, w_scale, y_scale, y_zp, axis=1)


def infer_conv_integer(
    attrs: ConvAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    x, w = first_type(types), types[1]
    check(w is not None, "weights are required")
    return [TensorType("int32", infer_conv(attrs, [x, w], values)[0].shape)]


@register_op("ConvInteger", attrs=ConvAttrs, infer=infer_conv_integer, inputs=(2, 4), macs=conv_macs())
def conv_integer(
    attrs: ConvAttrs,
    x: np.ndarray,
    w: np.ndarray,
    x_zp: np.ndarray | None = None,
    w_zp: np.ndarray | None = None,
) -> np.ndarray:
    return integer_conv(attrs, x, x_zp, w, w_zp).astype(np.int32)


def _matmul_shape(a: TensorType, b: TensorType) -> Shape | None:
    if a.shape is None or b.shape is None:
        return None
    check(len(a.shape) >= 1 and len(b.shape) >= 1, "MatMul inputs must have rank >= 1")
    a_shape = (1, *a.shape) if len(a.shape) == 1 else a.shape
    b_shape = (*b.shape, 1) if len(b.shape) == 1 else b.shape
    batch = broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
    out = (*(batch or ()), a_shape[-2], b_shape[-1])
    if len(a.shape) == 1:
        out = out[:-2] + out[-1:]
    if len(b.shape) == 1:
        out = out[:-1]
    return out


def infer_qlinear_matmul(
    attrs: NoAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    a, b = first_type(types), input_type(types, 3, "input B")
    y_zp = types[7] if len(types) > 7 else None
    return [TensorType(y_zp.dtype if y_zp is not None else "uint8", _matmul_shape(a, b))]


@register_op("QLinearMatMul", infer=infer_qlinear_matmul, inputs=8, macs=matmul_macs(3))
def qlinear_matmul(
    attrs: NoAttrs,
    a: np.ndarray,
    a_scale: np.ndarray,
    a_zp: np.ndarray,
    b: np.ndarray,
    b_scale: np.ndarray,
    b_zp: np.ndarray,
    y_scale: np.ndarray,
    y_zp: np.ndarray,
) -> np.ndarray:
    """Per-tensor A; B per tensor or per column (scales of shape [N])."""
    b_center = b.astype(np.float64) - np.asarray(b_zp, dtype=np.float64).reshape(-1)
    acc = np.matmul(centered(a, a_zp), b_center).astype(np.int64)
    return requantize(acc, a_scale, b_scale, y_scale, y_zp, axis=-1)


def infer_matmul_integer(
    attrs: NoAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    a, b = first_type(types), input_type(types, 1, "input B")
    return [TensorType("int32", _matmul_shape(a, b))]


@register_op("MatMulInteger", infer=infer_matmul_integer, inputs=(2, 4), macs=matmul_macs())
def matmul_integer(
    attrs: NoAttrs,
    a: np.ndarray,
    b: np.ndarray,
    a_zp: np.ndarray | None = None,
    b_zp: np.ndarray | None = None,
) -> np.ndarray:
    b_center = b.astype(np.float64) - (0 if b_zp is None else np.asarray(b_zp, np.float64).reshape(-1))
    return np.matmul(centered(a, a_zp), b_center).astype(np.int32)


# ------------------------------------------------------------------------- edgecnn's int8 layers


@dataclass(frozen=True)
class Int8ConvAttrs(FusedConvAttrs):
    """A FusedConv computed in int8; ``y_scale``/``y_zero_point`` omitted -> float32 output."""


@dataclass(frozen=True)
class Int8GemmAttrs(FusedGemmAttrs):
    """A FusedGemm computed in int8 (alpha, beta folded into the scales and bias beforehand)."""


def quantize_input(x: np.ndarray, x_scale: np.ndarray, x_zp: np.ndarray) -> np.ndarray:
    """Float input is quantised on the way in (the QuantizeLinear a QDQ model would carry)."""
    if x.dtype.name in QUANT_DTYPES:
        return x
    return quantize_linear(QuantizeAttrs(), x, x_scale, x_zp)


def finish(
    attrs: FusedConvAttrs | FusedGemmAttrs,
    acc: np.ndarray,
    x_scale: np.ndarray,
    w_scale: np.ndarray,
    y_scale: np.ndarray | None,
    y_zp: np.ndarray | None,
    axis: int,
) -> np.ndarray:
    """int32 accumulators -> activation -> float32, or requantised when an output scale is given."""
    multiplier = output_multiplier(x_scale, w_scale, y_scale)
    v = acc.astype(np.float32) * per_axis(multiplier, acc.ndim, axis)
    if y_scale is None:
        return attrs.apply(v.astype(np.float32))
    ys = np.float32(np.asarray(y_scale).reshape(()))
    if attrs.activation == "relu":
        v = np.maximum(v, np.float32(0))
    elif attrs.activation != "none":
        v = attrs.apply((v * ys).astype(np.float32)) / ys
    assert y_zp is not None
    return saturate(np.rint(v) + np.float32(np.asarray(y_zp).reshape(())), y_zp.dtype)


def infer_int8_conv(
    attrs: Int8ConvAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    shape = infer_qlinear_conv(attrs, types, values)[0].shape
    y_zp = types[7] if len(types) > 7 else None
    return [TensorType(y_zp.dtype if y_zp is not None else "float32", shape)]


@register_op("Int8Conv", attrs=Int8ConvAttrs, infer=infer_int8_conv, inputs=(6, 9), macs=conv_macs(3))
def int8_conv(
    attrs: Int8ConvAttrs,
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zp: np.ndarray,
    w: np.ndarray,
    w_scale: np.ndarray,
    w_zp: np.ndarray | None,
    y_scale: np.ndarray | None = None,
    y_zp: np.ndarray | None = None,
    b: np.ndarray | None = None,
) -> np.ndarray:
    acc = integer_conv(attrs, quantize_input(x, x_scale, x_zp), x_zp, w, w_zp)
    if b is not None:
        acc = acc + b.astype(np.int64).reshape(-1, *([1] * (acc.ndim - 2)))
    return finish(attrs, acc, x_scale, w_scale, y_scale, y_zp, axis=1)


def infer_int8_gemm(
    attrs: Int8GemmAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    a, b = first_type(types), types[3]
    check(b is not None, "weights are required")
    assert b is not None
    check(not attrs.trans_a, "Int8Gemm takes A untransposed")
    rows = a.shape[0] if a.shape is not None else None
    cols = None if b.shape is None else b.shape[0 if attrs.trans_b else 1]
    y_zp = types[7] if len(types) > 7 else None
    return [TensorType(y_zp.dtype if y_zp is not None else "float32", (rows, cols))]


@register_op("Int8Gemm", attrs=Int8GemmAttrs, infer=infer_int8_gemm, inputs=(6, 9), macs=gemm_macs(3))
def int8_gemm(
    attrs: Int8GemmAttrs,
    a: np.ndarray,
    a_scale: np.ndarray,
    a_zp: np.ndarray,
    b: np.ndarray,
    b_scale: np.ndarray,
    b_zp: np.ndarray | None,
    y_scale: np.ndarray | None = None,
    y_zp: np.ndarray | None = None,
    c: np.ndarray | None = None,
) -> np.ndarray:
    """y = act(A @ B' + C) with B' = B^T if trans_b; B per output column, C int32 of shape [N]."""
    weights = b.T if attrs.trans_b else b
    w_center = weights.astype(np.float64) - (0 if b_zp is None else np.asarray(b_zp, np.float64).reshape(-1))
    acc = np.matmul(centered(quantize_input(a, a_scale, a_zp), a_zp), w_center).astype(np.int64)
    if c is not None:
        acc = acc + c.astype(np.int64).reshape(-1)
    return finish(attrs, acc, a_scale, b_scale, y_scale, y_zp, axis=-1)


# ------------------------------------------- integer Add, pooling and Concat (com.microsoft semantics)


@dataclass(frozen=True)
class QLinearAddAttrs:
    """``activation``: "relu" clamps the output at its zero point: the Relu a QDQ graph may carry
    between its Add and QuantizeLinear (Q(max(v, 0)) = max(Q(v), y_zp) since rounding is monotone)."""

    activation: str = "none"

    def __post_init__(self) -> None:
        if self.activation not in ("none", "relu"):
            raise ValueError(f"QLinearAdd applies no activation or relu, not {self.activation!r}")


def _scalar_param(value: np.ndarray | None, name: str) -> np.ndarray:
    check(value is not None and np.asarray(value).size == 1, f"{name} must be one value (per tensor)")
    assert value is not None
    return np.asarray(value).reshape(())


def add_parameters(
    a_scale: np.ndarray,
    a_zp: np.ndarray,
    b_scale: np.ndarray,
    b_zp: np.ndarray,
    y_scale: np.ndarray,
    y_zp: np.ndarray,
) -> tuple[np.float32, np.float32, np.float32]:
    """(a_scale / y_scale, b_scale / y_scale, y_zp - (ratio_a * a_zp + ratio_b * b_zp)) in float32,
    each rounding where onnxruntime's QLinearAdd (MLAS, x86 AVX2 build) rounds it."""
    ys = np.float32(_scalar_param(y_scale, "y_scale"))
    ratio_a = np.float32(np.float32(_scalar_param(a_scale, "a_scale")) / ys)
    ratio_b = np.float32(np.float32(_scalar_param(b_scale, "b_scale")) / ys)
    za, zb = np.float32(_scalar_param(a_zp, "a_zero_point")), np.float32(_scalar_param(b_zp, "b_zero_point"))
    zy = np.float32(_scalar_param(y_zp, "y_zero_point"))
    # the compiler fuses ratio_a * za into the sum: fma(ratio_a, za, ratio_b * zb)
    offset = fused_multiply_add(np.asarray(za), ratio_a, np.asarray(np.float32(ratio_b * zb)))
    return ratio_a, ratio_b, np.float32(zy - offset)


def fused_multiply_add(x: np.ndarray, ratio: np.float32, addend: np.ndarray) -> np.ndarray:
    """float32 fma(x, ratio, addend) for 8-bit x: the product of an 8-bit integer and a float32 is
    exact in float64, and so is its sum with a float32 within 2**21 of its magnitude, so one
    rounding to float32 remains, as in the fused instruction."""
    return (x.astype(np.float64) * np.float64(ratio) + addend.astype(np.float64)).astype(np.float32)


def infer_qlinear_add(
    attrs: QLinearAddAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    a, b = first_type(types), input_type(types, 3, "input B")
    y_zp = input_type(types, 7, "y_zero_point")
    check(a.dtype in QUANT_DTYPES, f"QLinearAdd reads int8 or uint8, got {a.dtype}")
    check(
        a.dtype == b.dtype == y_zp.dtype,
        f"A, B and Y must share one 8-bit type, got {a.dtype}, {b.dtype}, {y_zp.dtype}",
    )
    shape = None if a.shape is None or b.shape is None else broadcast_shapes(a.shape, b.shape)
    return [TensorType(y_zp.dtype, shape)]


@register_op("QLinearAdd", attrs=QLinearAddAttrs, infer=infer_qlinear_add, inputs=8)
def qlinear_add(
    attrs: QLinearAddAttrs,
    a: np.ndarray,
    a_scale: np.ndarray,
    a_zp: np.ndarray,
    b: np.ndarray,
    b_scale: np.ndarray,
    b_zp: np.ndarray,
    y_scale: np.ndarray,
    y_zp: np.ndarray,
) -> np.ndarray:
    """y = saturate(round(a * as/ys + b * bs/ys + (yzp - as/ys * azp - bs/ys * bzp))), numpy
    broadcasting, in onnxruntime's float32 order: b's term fused onto the constant, then a's; an
    input constant along the last axis (a scalar per run of the loop) is added unfused first."""
    ratio_a, ratio_b, fixed = add_parameters(a_scale, a_zp, b_scale, b_zp, y_scale, y_zp)
    shape = np.broadcast_shapes(a.shape, b.shape)
    a_run = a.size == 1 or (a.shape[-1:] != shape[-1:] and shape[-1:] != (1,))
    b_run = not a_run and (b.size == 1 or (b.shape[-1:] != shape[-1:] and shape[-1:] != (1,)))
    base = np.broadcast_to(fixed, shape)
    if a_run:
        base = (base + (a.astype(np.float32) * ratio_a)).astype(np.float32)
    if b_run:
        base = (base + (b.astype(np.float32) * ratio_b)).astype(np.float32)
    if not b_run:
        base = fused_multiply_add(np.broadcast_to(b, shape), ratio_b, base)
    if not a_run:
        base = fused_multiply_add(np.broadcast_to(a, shape), ratio_a, base)
    y = saturate(base, y_zp.dtype)
    if attrs.activation == "relu":
        y = np.maximum(y, y_zp.reshape(()))
    return np.asarray(y, order="C")


def global_average_multiplier(x_scale: np.ndarray, y_scale: np.ndarray, size: int) -> np.float32:
    """x_scale / (y_scale * size) in float32: the one multiplier onnxruntime applies to the sum."""
    xs = np.float32(_scalar_param(x_scale, "x_scale"))
    ys = np.float32(_scalar_param(y_scale, "y_scale"))
    return np.float32(xs / np.float32(ys * np.float32(size)))


def infer_qlinear_global_average_pool(
    attrs: NoAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    x, y_zp = first_type(types), input_type(types, 4, "y_zero_point")
    check(
        x.dtype in QUANT_DTYPES and x.dtype == y_zp.dtype,
        f"X and Y must share one 8-bit type, got {x.dtype}, {y_zp.dtype}",
    )
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    check(len(x.shape) >= 3, "QLinearGlobalAveragePool needs (N, C, spatial...) input")
    return [TensorType(x.dtype, (*x.shape[:2], *([1] * (len(x.shape) - 2))))]


@register_op("QLinearGlobalAveragePool", infer=infer_qlinear_global_average_pool, inputs=5)
def qlinear_global_average_pool(
    attrs: NoAttrs,
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zp: np.ndarray,
    y_scale: np.ndarray,
    y_zp: np.ndarray,
) -> np.ndarray:
    """y = saturate(round(float32(sum(x) - N * x_zp) * (xs / (ys * N))) + y_zp) per (image, channel),
    N the spatial size (channels first)."""
    size = int(np.prod(x.shape[2:]))
    acc = x.reshape(*x.shape[:2], -1).astype(np.int64).sum(axis=-1) - size * int(
        _scalar_param(x_zp, "x_zero_point")
    )
    scaled = np.rint(acc.astype(np.float32) * global_average_multiplier(x_scale, y_scale, size))
    y = saturate(scaled + np.float32(_scalar_param(y_zp, "y_zero_point")), y_zp.dtype)
    return y.reshape(*x.shape[:2], *([1] * (x.ndim - 2)))


def requantized(
    x: np.ndarray, x_scale: np.ndarray, x_zp: np.ndarray, y_scale: np.ndarray, y_zp: np.ndarray
) -> np.ndarray:
    """Q(DQ(x)) from x's parameters to y's: x itself where they are equal."""
    if np.float32(x_scale.reshape(())) == np.float32(y_scale.reshape(())) and int(x_zp.reshape(())) == int(
        y_zp.reshape(())
    ):
        return x
    attrs = QuantizeAttrs()
    return quantize_linear(
        attrs, dequantize_linear(attrs, x, np.asarray(x_scale, np.float32), x_zp), y_scale, y_zp
    )


def infer_qlinear_concat(
    attrs: ConcatAttrs, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> list[TensorType]:
    check(
        len(types) >= 5 and (len(types) - 2) % 3 == 0,
        "QLinearConcat takes Y's scale and zero point, then (X, scale, zero point) triples",
    )
    y_zp = input_type(types, 1, "y_zero_point")
    parts = list(types[2::3])
    for part in parts:
        check(
            part is not None and part.dtype == y_zp.dtype,
            f"every input must be {y_zp.dtype} like Y's zero point",
        )
    return infer_concat(attrs, parts, list(values)[2::3])


@register_op("QLinearConcat", attrs=ConcatAttrs, infer=infer_qlinear_concat, inputs=(5, None))
def qlinear_concat(
    attrs: ConcatAttrs, y_scale: np.ndarray, y_zp: np.ndarray, *triples: np.ndarray
) -> np.ndarray:
    """Concat of each input requantised to Y's parameters (Q(DQ(x)), as onnxruntime's lookup table
    holds it); inputs quantised like Y are copied."""
    check(len(triples) % 3 == 0, "QLinearConcat takes (X, scale, zero point) triples after Y's")
    parts = [requantized(x, s, z, y_scale, y_zp) for x, s, z in zip(*[iter(triples)] * 3, strict=True)]
    return np.concatenate(parts, axis=attrs.axis)


def infer_qlinear_unary(
    attrs: object, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    x, y_zp = first_type(types), input_type(types, 4, "y_zero_point")
    check(
        x.dtype in QUANT_DTYPES and x.dtype == y_zp.dtype,
        f"X and Y must share one 8-bit type, got {x.dtype}, {y_zp.dtype}",
    )
    return [TensorType(x.dtype, x.shape)]


@register_op("QLinearLeakyRelu", attrs=LeakyReluAttrs, infer=infer_qlinear_unary, inputs=5)
def qlinear_leaky_relu(
    attrs: LeakyReluAttrs,
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zp: np.ndarray,
    y_scale: np.ndarray,
    y_zp: np.ndarray,
) -> np.ndarray:
    """Q(LeakyRelu(DQ(x))) in float32, per tensor: what onnxruntime tabulates for each 8-bit code."""
    plain = QuantizeAttrs()
    scale = np.asarray(_scalar_param(x_scale, "x_scale"), np.float32)
    v = dequantize_linear(plain, x, scale, _scalar_param(x_zp, "x_zero_point"))
    return quantize_linear(plain, leaky_relu(attrs, v), y_scale, _scalar_param(y_zp, "y_zero_point"))


def infer_qlinear_lrn(
    attrs: LRNAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    x = infer_qlinear_unary(attrs, types, values)[0]
    return infer_lrn(attrs, [x], values)


@register_op("QLinearLRN", attrs=LRNAttrs, infer=infer_qlinear_lrn, inputs=5)
def qlinear_lrn(
    attrs: LRNAttrs,
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zp: np.ndarray,
    y_scale: np.ndarray,
    y_zp: np.ndarray,
) -> np.ndarray:
    """Q(LRN(DQ(x))) per tensor, the float LRN between a QDQ model's DequantizeLinear and
    QuantizeLinear (edgecnn's fused form: onnxruntime runs that float graph)."""
    plain = QuantizeAttrs()
    scale = np.asarray(_scalar_param(x_scale, "x_scale"), np.float32)
    v = dequantize_linear(plain, x, scale, _scalar_param(x_zp, "x_zero_point"))
    return quantize_linear(plain, lrn(attrs, v), y_scale, _scalar_param(y_zp, "y_zero_point"))


def average_windows(attrs: AveragePoolAttrs, shape: Sequence[int]) -> tuple[np.ndarray, tuple[int, int]]:
    """Each output pixel's window of a 2-D QLinearAveragePool as onnxruntime walks it: rows of
    (top, bottom, left, right, count) clipped to the image (padding contributes no terms), count
    the kernel size with count_include_pad; and the output's (height, width)."""
    geo = pool_geometry(attrs, shape)
    check(len(shape) == 4 and geo.pads is not None, "QLinearAveragePool takes (N, C, H, W) with known pads")
    check(all(d == 1 for d in geo.dilations), "QLinearAveragePool has no dilations")
    assert geo.pads is not None
    out_h, out_w = int(geo.out[0]), int(geo.out[1])
    rows = []
    for oy in range(out_h):
        top = oy * geo.strides[0] - geo.pads[0]
        bottom, top = min(top + geo.kernel[0], shape[2]), max(top, 0)
        for ox in range(out_w):
            left = ox * geo.strides[1] - geo.pads[1]
            right, left = min(left + geo.kernel[1], shape[3]), max(left, 0)
            area = (
                geo.kernel[0] * geo.kernel[1] if attrs.count_include_pad else (bottom - top) * (right - left)
            )
            rows.append((top, bottom, left, right, area))
    return np.array(rows, dtype=np.int64).reshape(-1, 5), (out_h, out_w)


def infer_qlinear_average_pool(
    attrs: AveragePoolAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    x = infer_qlinear_unary(attrs, types, values)[0]
    return infer_pool(attrs, [x], values)


@register_op("QLinearAveragePool", attrs=AveragePoolAttrs, infer=infer_qlinear_average_pool, inputs=5)
def qlinear_average_pool(
    attrs: AveragePoolAttrs,
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zp: np.ndarray,
    y_scale: np.ndarray,
    y_zp: np.ndarray,
) -> np.ndarray:
    """onnxruntime's QLinearAveragePool: the dequantised taps summed in float32 row by row, divided
    by the count, then saturate(round(mean / y_scale + y_zp)) (the zero point added before rounding)."""
    windows, out_hw = average_windows(attrs, x.shape)
    v = dequantize_linear(QuantizeAttrs(), x, np.asarray(_scalar_param(x_scale, "x_scale"), np.float32), x_zp)
    ys, zy = np.float32(_scalar_param(y_scale, "y_scale")), np.float32(_scalar_param(y_zp, "y_zero_point"))
    out = np.empty((*x.shape[:2], len(windows)), dtype=y_zp.dtype)
    for i, (top, bottom, left, right, area) in enumerate(windows):
        total = np.zeros(x.shape[:2], np.float32)
        for h in range(top, bottom):
            for w in range(left, right):
                total = (total + v[:, :, h, w]).astype(np.float32)
        mean = (total / np.float32(area)).astype(np.float32)
        out[:, :, i] = saturate(((mean / ys).astype(np.float32) + zy).astype(np.float32), y_zp.dtype)
    return out.reshape(*x.shape[:2], *out_hw)
