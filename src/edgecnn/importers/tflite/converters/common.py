"""What every TFLite converter shares: the registry, option reading, fused activations, padding."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from edgecnn.importers.tflite.builder import NCHW, ConversionError, GraphBuilder
from edgecnn.importers.tflite.reader import TfliteOperator
from edgecnn.ops.common import AutoPad
from edgecnn.ops.registry import NoAttrs

Converter = Callable[[GraphBuilder, TfliteOperator], None]

CONVERTERS: dict[str, Converter] = {}

(
    ACTIVATION_NONE,
    ACTIVATION_RELU,
    ACTIVATION_RELU_N1_TO_1,
    ACTIVATION_RELU6,
    ACTIVATION_TANH,
    ACTIVATION_SIGN_BIT,
) = range(6)
PADDING_SAME, PADDING_VALID = 0, 1


def converts(*opcodes: str) -> Callable[[Converter], Converter]:
    """Register a converter for TFLite builtin operators."""

    def decorate(fn: Converter) -> Converter:
        for opcode in opcodes:
            CONVERTERS[opcode] = fn
        return fn

    return decorate


def option(op: TfliteOperator, name: str, default: Any) -> Any:
    """An option of the operator's builtin options table (the schema default when it has none)."""
    if op.options is None or not hasattr(op.options, name):
        return default
    return getattr(op.options, name)()


def inputs(op: TfliteOperator, count: int) -> tuple[int, ...]:
    """The first ``count`` input indices, -1 for those the file omits."""
    return tuple(op.inputs[i] if i < len(op.inputs) else -1 for i in range(count))


def output(op: TfliteOperator) -> int:
    if not op.outputs or op.outputs[0] < 0:
        raise ConversionError("the operator has no output tensor")
    return op.outputs[0]


def emit(
    b: GraphBuilder, op_name: str, attrs: Any, args: list[str], out: int, layout: str, fused: int
) -> None:
    """One node writing tensor ``out`` (real domain, ``layout``), with TFLite's fused activation."""
    quantization = b.tensor(out).quantization
    if fused != ACTIVATION_NONE and b.quantized(out) and quantization is not None and quantization.per_tensor:
        # TFLite clamps the quantised result; so does this, keeping DQ -> op -> Q whole for QDQ folding
        dtype = b.tensor(out).dtype
        stored = b.put(out, layout, real=False)
        b.node(op_name, attrs, args, [f"{stored}::linear::real"])
        b.quantize(out, f"{stored}::linear::real", f"{stored}::linear", layout)
        low, high = activation_range(
            fused, float(quantization.scale[0]), int(quantization.zero_point[0]), dtype
        )
        bounds = [b.constant(low, "activation_min", dtype), b.constant(high, "activation_max", dtype)]
        b.node("Clip", NoAttrs(), [f"{stored}::linear", *bounds], [stored])
        return
    target = b.put(out, layout, real=True)
    if fused == ACTIVATION_NONE:
        b.node(op_name, attrs, args, [target])
        return
    linear = f"{target}::linear"
    b.node(op_name, attrs, args, [linear])
    activation(b, fused, linear, target)


def activation(b: GraphBuilder, code: int, source: str, target: str) -> None:
    """Apply a fused activation (ActivationFunctionType ``code``) from ``source`` to ``target``."""
    if code == ACTIVATION_RELU:
        b.node("Relu", NoAttrs(), [source], [target])
        return
    low, high = (0.0, 6.0) if code == ACTIVATION_RELU6 else (-1.0, 1.0)
    b.node(
        "Clip",
        NoAttrs(),
        [source, b.constant(low, f"{target}::min"), b.constant(high, f"{target}::max")],
        [target],
    )


def activation_range(code: int, scale: float, zero_point: int, dtype: str) -> tuple[int, int]:
    """The integer bounds TFLite clamps a quantised output to for a RELU-family activation: the
    real bounds quantised (float32 division, halves rounded away from zero), within the dtype."""
    info = np.iinfo(dtype)
    low, high = (-1.0, 1.0) if code == ACTIVATION_RELU_N1_TO_1 else (0.0, 6.0)

    def quantize(value: float) -> int:
        steps = float(np.float32(value) / np.float32(scale))
        return zero_point + int(math.copysign(math.floor(abs(steps) + 0.5), steps))

    top = int(info.max) if code == ACTIVATION_RELU else min(int(info.max), quantize(high))
    return max(int(info.min), quantize(low)), top


def fused_activation(op: TfliteOperator) -> int:
    """The fused activation as TFLite's kernels apply it: a clamp for the RELU family; TANH and
    SIGN_BIT fall through their activation-range computation and clamp nothing."""
    code = int(option(op, "FusedActivationFunction", ACTIVATION_NONE))
    if code in (ACTIVATION_RELU, ACTIVATION_RELU_N1_TO_1, ACTIVATION_RELU6):
        return code
    if code in (ACTIVATION_NONE, ACTIVATION_TANH, ACTIVATION_SIGN_BIT):
        return ACTIVATION_NONE
    raise ConversionError(f"fused activation {code} is not one TFLite defines")


def padding(
    op: TfliteOperator,
    sizes: tuple[Any, ...],
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int],
) -> tuple[tuple[int, ...], AutoPad]:
    """Explicit (top, left, bottom, right) pads as TFLite computes them, or SAME_UPPER when the
    spatial sizes are dynamic (the same rule: the odd pixel goes after)."""
    mode = int(option(op, "Padding", PADDING_SAME))
    if mode == PADDING_VALID:
        return (0, 0, 0, 0), AutoPad.NOTSET
    if mode != PADDING_SAME:
        raise ConversionError(f"padding {mode} is neither SAME nor VALID")
    if any(s is None for s in sizes):
        return (), AutoPad.SAME_UPPER
    before, after = [], []
    for size, k, stride, dilation in zip(sizes, kernel, strides, dilations):
        out = math.ceil(size / stride)
        total = max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)
        before.append(total // 2)
        after.append(total - total // 2)
    return (*before, *after), AutoPad.NOTSET


def positive(values: tuple[int, int], what: str) -> tuple[int, int]:
    if any(v < 1 for v in values):
        raise ConversionError(f"{what} {list(values)} must be positive")
    return values


def broadcast_constant(b: GraphBuilder, index: int, layout: str, rank: int) -> str:
    """A constant operand of an elementwise op, in the real domain and broadcastable in ``layout``:
    lower-rank constants (a bias of shape [C]) are padded to ``rank`` and moved to NCHW."""
    t = b.tensor(index)
    if layout != NCHW or len(t.shape) == 4:
        return b.get(index, layout)
    if len(t.shape) > rank:
        raise ConversionError(f"constant '{t.name}' has more axes than the tensor it combines with")
    value = real_value(b, index).reshape((1,) * (4 - len(t.shape)) + t.shape)
    return b.constant(value.transpose(0, 3, 1, 2), f"{b.names[index]}::nchw", "float32")


def real_value(b: GraphBuilder, index: int) -> np.ndarray:
    """A constant's real value: (q - zero point) * scale for quantised ones, as DequantizeLinear computes it."""
    t = b.tensor(index)
    data = b.constant_value(index, f"tensor '{t.name}'")
    q = t.quantization
    if q is None or not b.quantized(index):
        return data.astype(np.float32)
    shape = [1] * data.ndim
    if not q.per_tensor:
        shape[q.axis] = -1
    centered = (data.astype(np.int32) - q.zero_point.reshape(shape).astype(np.int32)).astype(np.float32)
    return centered * q.scale.reshape(shape)


def same_quantization(b: GraphBuilder, indices: list[int]) -> bool:
    """Whether every tensor is quantised with one and the same scale and zero point, so that data
    movement can run on the stored integers (bit-exact, as TFLite's kernels do)."""
    params = []
    for i in indices:
        q = b.tensor(i).quantization
        if q is None or not b.quantized(i) or not q.per_tensor:
            return False
        params.append((float(q.scale[0]), int(q.zero_point[0]), b.tensor(i).dtype))
    return len(set(params)) == 1
