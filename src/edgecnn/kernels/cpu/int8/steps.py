"""int8 CPU kernels for QLinearConv / Int8Conv, QLinearMatMul / Int8Gemm, QuantizeLinear and
DequantizeLinear.

Prepared once per plan: weights packed as (groups, rows, K) int8, the input zero point folded into
the int32 bias (sum((x - zx) * w) = sum(x * w) - zx * sum(w), so the GEMM reads raw 8-bit data),
and one float32 multiplier per output channel. Only symmetric weights (zero point 0) and per-tensor
input/output quantisation take this path; anything else runs the reference kernel.

Each kernel also writes into a given output (``run_into``, the arena protocol of kernels.registry):
the quantised input and the im2col columns then live in the thread's shared scratch, so a
steady-state run of an int8 model allocates no array memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard

import numpy as np

from edgecnn.ir.graph import Node, TensorType, concrete_dims
from edgecnn.kernels.cpu.gemm.epilogue import activation_args
from edgecnn.kernels.cpu.int8.eltwise import (
    AddConstants,
    add_constants,
    concrete_8bit,
    qlinear_add_into,
    scalar_constants,
)
from edgecnn.kernels.cpu.int8.loops import conv_int8, dense_int8, dequantize_into, quantize_into
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import scratch
from edgecnn.kernels.cpu.system.threads import call, is_small
from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning
from edgecnn.kernels.registry import StepFn
from edgecnn.ops.conv import conv_geometry
from edgecnn.ops.quant import QUANT_DTYPES, output_multiplier
from edgecnn.ops.quant_residual import (
    CONV_INPUTS,
    OUT_ZP,
    SHORTCUT,
    SHORTCUT_SCALE,
)
from edgecnn.ops.spatial import output_dims

X, X_SCALE, X_ZP, W, W_SCALE, W_ZP, Y_SCALE, Y_ZP, BIAS = range(9)


def _value(values: Sequence[np.ndarray | None], index: int) -> np.ndarray | None:
    return values[index] if index < len(values) else None


def _given(node: Node, index: int) -> bool:
    return len(node.inputs) > index and bool(node.inputs[index])


def _scalar(values: Sequence[np.ndarray | None], index: int) -> bool:
    value = _value(values, index)
    return value is not None and value.size == 1


def byte_scratch(size: int) -> np.ndarray:
    """``size`` bytes of the thread's shared scratch (viewed as uint8; callers view them as int8)."""
    return scratch((size + 3) // 4).view(np.uint8)[:size]


def _concrete(t: TensorType | None, rank: int) -> TypeGuard[TensorType]:
    return t is not None and t.is_concrete and t.shape is not None and len(t.shape) == rank


def quantized_layer(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None], rank: int
) -> bool:
    """Constant int8 symmetric weights, per-tensor input/output parameters, int32 bias, known shapes."""
    w = _value(values, W)
    w_zp = _value(values, W_ZP)
    bias = _value(values, BIAS)
    x = types[0] if types else None
    if not (_concrete(x, rank) and w is not None and w.dtype == np.int8):
        return False
    if x.dtype not in (*QUANT_DTYPES, "float32") or len(node.outputs) != 1:
        return False
    if x.dtype == "float32" and node.op.startswith("QLinear"):
        return False
    if _given(node, W_ZP) and (w_zp is None or np.any(w_zp != 0)):
        return False
    if not (_scalar(values, X_SCALE) and _scalar(values, X_ZP) and _value(values, W_SCALE) is not None):
        return False
    if _given(node, Y_SCALE) != _given(node, Y_ZP):
        return False
    if _given(node, Y_SCALE) and not (_scalar(values, Y_SCALE) and _scalar(values, Y_ZP)):
        return False
    return not (_given(node, BIAS) and (bias is None or bias.dtype != np.int32))


class QuantizedLayer:
    """What conv and dense share: multipliers, the zero-point-corrected bias, output parameters."""

    def __init__(self, node: Node, values: Sequence[np.ndarray | None], weights: np.ndarray, channels: int):
        x_scale, x_zp, w_scale = _value(values, X_SCALE), _value(values, X_ZP), _value(values, W_SCALE)
        assert x_scale is not None and x_zp is not None and w_scale is not None
        self.x_scale = float(np.float32(x_scale.reshape(())))
        self.x_zp = int(x_zp.reshape(()))
        self.x_dtype = x_zp.dtype
        y_scale, y_zp = _value(values, Y_SCALE), _value(values, Y_ZP)
        self.float_output = y_scale is None
        self.multiplier = np.ascontiguousarray(
            np.broadcast_to(output_multiplier(x_scale, w_scale, y_scale), (channels,)),
            dtype=np.float32,
        )
        self.y_scale = 1.0 if y_scale is None else float(np.float32(y_scale.reshape(())))
        self.y_zp = 0 if y_zp is None else int(y_zp.reshape(()))
        self.out_dtype = np.dtype(np.float32) if y_zp is None else y_zp.dtype
        info = np.iinfo(y_zp.dtype) if y_zp is not None else np.iinfo(np.int8)
        self.lo, self.hi = int(info.min), int(info.max)
        bias = _value(values, BIAS)
        row_sums = weights.reshape(channels, -1).astype(np.int64).sum(axis=1)
        corrected = (0 if bias is None else bias.astype(np.int64)) - self.x_zp * row_sums
        self.bias = np.ascontiguousarray(corrected, dtype=np.int32)
        self.activation = activation_args(node.attrs)

    def quantized_input(self, x: np.ndarray, buffer: np.ndarray) -> np.ndarray:
        """8-bit input as given; float input quantised with the layer's input scale and zero point
        into ``buffer`` (x.size bytes, see ``input_bytes``)."""
        if x.dtype != np.float32:
            return np.ascontiguousarray(x)
        q = buffer[: x.size].view(self.x_dtype).reshape(x.shape)
        info = np.iinfo(self.x_dtype)
        call(
            quantize_into,
            is_small(x.size),
            np.ascontiguousarray(x).reshape(-1),
            self.x_scale,
            self.x_zp,
            int(info.min),
            int(info.max),
            q.reshape(-1),
        )
        return q

    @staticmethod
    def input_bytes(x: np.ndarray) -> int:
        """Bytes the quantised copy of ``x`` needs (none when ``x`` is 8-bit already)."""
        return x.size if x.dtype == np.float32 else 0

    def epilogue_args(self) -> tuple:
        return (self.y_scale, self.y_zp, self.lo, self.hi, self.float_output, *self.activation)


class Int8ConvKernel(QuantizedLayer):
    """im2col on 8-bit data + int8 GEMM with int32 accumulation + requantising epilogue."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        x_type, w = types[X], _value(values, W)
        assert x_type is not None and x_type.shape is not None and w is not None
        x_shape = x_type.dims
        geo = conv_geometry(node.attrs, x_shape, w.shape)
        assert geo.pads is not None
        self.out_hw = concrete_dims(
            output_dims(x_shape[2:], geo.kernel, geo.strides, geo.dilations, geo.pads)
        )
        group = node.attrs.group
        super().__init__(node, values, w, w.shape[0])
        self.geometry = (*geo.kernel, *geo.strides, geo.pads[0], geo.pads[1], *geo.dilations)
        self.pointwise = tuple(geo.kernel) == (1, 1) and tuple(geo.strides) == (1, 1) and not any(geo.pads)
        rows = w.shape[1] * w.shape[2] * w.shape[3]
        self.weights = np.ascontiguousarray(w.reshape(group, w.shape[0] // group, rows))
        self.out_shape = (x_shape[0], w.shape[0], *self.out_hw)
        self.columns = (rows, self.out_hw[0] * self.out_hw[1])
        self.small = x_shape[0] * w.shape[0] * rows * self.columns[1] < active_cpu_tuning().gemm_grain

    def __call__(self, x: np.ndarray, *rest: object) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=self.out_dtype)
        self.run_into(out, x, *rest)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the planned shape and type); the quantised input and
        the columns share one scratch buffer (pointwise convolutions read the image: 1 byte)."""
        start = self.input_bytes(x)
        column_bytes = 1 if self.pointwise else self.columns[0] * self.columns[1]
        buffer = byte_scratch(start + column_bytes)
        q = self.quantized_input(x, buffer)
        columns = buffer[start:].view(q.dtype).reshape((1, 1) if self.pointwise else self.columns)
        call(
            conv_int8,
            self.small,
            q,
            self.weights,
            self.bias,
            self.multiplier,
            *self.geometry,
            self.x_zp,
            *self.epilogue_args(),
            self.pointwise,
            columns,
            out,
        )


class Int8DenseKernel(QuantizedLayer):
    """Rows of A times int8 weight rows (N, K), int32 accumulation, requantising epilogue."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        w = _value(values, W)
        assert w is not None
        transposed = node.op == "QLinearMatMul" or not getattr(node.attrs, "trans_b", False)
        self.weights = np.ascontiguousarray(w.T if transposed else w)  # (N, K)
        super().__init__(node, values, self.weights, self.weights.shape[0])

    def __call__(self, a: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty((a.shape[0], self.weights.shape[0]), dtype=self.out_dtype)
        self.run_into(out, a)
        return out

    def run_into(self, out: np.ndarray, a: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous (M, N)); float input is quantised into scratch."""
        q = self.quantized_input(a, byte_scratch(self.input_bytes(a)))
        small = q.shape[0] * self.weights.size < active_cpu_tuning().gemm_grain
        call(dense_int8, small, q, self.weights, self.bias, self.multiplier, *self.epilogue_args(), out)


def when_conv(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    w = _value(values, W)
    return quantized_layer(node, types, values, 4) and w is not None and w.ndim == 4


def when_conv_add(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """A QLinearConvAdd whose convolution when_conv takes, with an 8-bit shortcut of the output's
    type (its shape is the output's: the op's inference checks it) and per-tensor Add parameters."""
    shortcut = types[SHORTCUT] if len(types) > SHORTCUT else None
    zero = _value(values, OUT_ZP)
    return (
        when_conv(node, types[:CONV_INPUTS], values[:CONV_INPUTS])
        and concrete_8bit(shortcut)
        and zero is not None
        and shortcut is not None
        and shortcut.dtype == zero.dtype
        and scalar_constants(values, range(SHORTCUT_SCALE, OUT_ZP + 1))
    )


def residual_add(node: Node, values: Sequence[np.ndarray | None]) -> tuple[bool, AddConstants]:
    """(whether the convolution's output is the Add's first operand, the Add's constants) of a
    QLinearConvAdd."""
    params = [values[i] for i in range(SHORTCUT_SCALE, OUT_ZP + 1)]
    if any(p is None for p in params):
        raise ValueError("QLinearConvAdd's Add parameters must be constants")
    s_scale, s_zp, c_scale, c_zp, y_scale, y_zp = (p for p in params if p is not None)
    first = bool(node.attrs.conv_first)
    a, b = ((c_scale, c_zp), (s_scale, s_zp)) if first else ((s_scale, s_zp), (c_scale, c_zp))
    return first, add_constants(*a, *b, y_scale, y_zp, bool(node.attrs.relu))


class Int8ConvAddKernel(Int8ConvKernel):
    """QLinearConvAdd where the dot-product kernel does not apply: the convolution, then the Add in
    place over its output (two passes; int8_dot_conv_add adds in the epilogue)."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        self.conv_first, self.add = residual_add(node, values)

    def run_into(self, out: np.ndarray, x: np.ndarray, *rest: object) -> None:
        """Writes into ``out`` (C-contiguous, the planned shape and type; not the shortcut's buffer)."""
        super().run_into(out, x)
        flat = out.reshape(-1)
        shortcut = np.ascontiguousarray(rest[SHORTCUT - 1]).reshape(-1)
        a, b = (flat, shortcut) if self.conv_first else (shortcut, flat)
        call(qlinear_add_into, is_small(flat.size), a, b, self.add, flat)


def when_dense(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    w = _value(values, W)
    if not (quantized_layer(node, types, values, 2) and w is not None and w.ndim == 2):
        return False
    if node.op == "Int8Gemm" and getattr(node.attrs, "trans_a", False):
        return False
    w_scale = _value(values, W_SCALE)
    return w_scale is not None and w_scale.ndim <= 1


class QuantizeKernel:
    """Per-tensor float32 -> int8/uint8 (QuantizeLinear) in one compiled pass."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        scale, zp = values[1], _value(values, 2)
        assert scale is not None
        self.scale = float(np.float32(scale.reshape(())))
        self.zp = 0 if zp is None else int(zp.reshape(()))
        self.dtype = np.dtype(node.attrs.output_dtype or (zp.dtype if zp is not None else np.uint8))
        info = np.iinfo(self.dtype)
        self.lo, self.hi = int(info.min), int(info.max)

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(x.shape, dtype=self.dtype)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, x's shape, the quantised type)."""
        flat = np.ascontiguousarray(x).reshape(-1)
        call(quantize_into, is_small(x.size), flat, self.scale, self.zp, self.lo, self.hi, out.reshape(-1))


def when_quantize(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    x = types[0] if types else None
    return (
        x is not None
        and x.dtype == "float32"
        and not node.attrs.block_size
        and _scalar(values, 1)
        and (not _given(node, 2) or _scalar(values, 2))
        and len(node.outputs) == 1
    )


class DequantizeKernel:
    """Per-tensor 8-bit -> float32 (DequantizeLinear) in one compiled pass: the float ops between
    the int8 layers of a QDQ model (residual Add, pooling) read it."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        scale, zp = values[1], _value(values, 2)
        assert scale is not None
        self.scale = float(np.float32(scale.reshape(())))
        self.zp = 0 if zp is None else int(zp.reshape(()))

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(x.shape, dtype=np.float32)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous float32, x's shape)."""
        flat = np.ascontiguousarray(x).reshape(-1)
        call(dequantize_into, is_small(x.size), flat, self.scale, self.zp, out.reshape(-1))


def when_dequantize(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    x = types[0] if types else None
    scale = _value(values, 1)
    return (
        x is not None
        and x.dtype in QUANT_DTYPES
        and not node.attrs.block_size
        and node.attrs.output_dtype in ("", "float32")
        and scale is not None
        and scale.dtype == np.float32
        and _scalar(values, 1)
        and (not _given(node, 2) or _scalar(values, 2))
        and len(node.outputs) == 1
    )


def int8_conv(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> StepFn:
    return Int8ConvKernel(node, types, values)


def int8_dense(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> StepFn:
    return Int8DenseKernel(node, types, values)


def quantize(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> StepFn:
    return QuantizeKernel(node, types, values)


register("int8_im2col_gemm", int8_conv, when=when_conv)
register("int8_conv_add", Int8ConvAddKernel, when=when_conv_add)
register("int8_dense", int8_dense, when=when_dense)
register("quantize_int8", quantize, when=when_quantize)
register("dequantize_int8", DequantizeKernel, when=when_dequantize)

__all__ = ["DequantizeKernel", "Int8ConvAddKernel", "Int8ConvKernel", "Int8DenseKernel", "QuantizeKernel"]
