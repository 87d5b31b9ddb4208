"""One converter per Caffe layer type: the layer's parameters and blobs -> edgecnn nodes.

A converter receives the layer's context and returns the tensor of each top. Caffe semantics
that differ from ONNX's are handled here: pooling rounds output sizes up and clips the last
window (ONNX's ceil_mode rule), average pooling divides by the window clipped to the padded
input (count_include_pad), BatchNorm stores its statistics multiplied by a scale factor blob.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Protocol, TypedDict

import numpy as np

from edgecnn.errors import ModelFormatError
from edgecnn.importers.darknet.weights import ParamKind
from edgecnn.ir.graph import Shape
from edgecnn.ops.activation import AlphaAttrs, LeakyReluAttrs, SoftmaxAttrs
from edgecnn.ops.conv import ConvAttrs, ConvTransposeAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.norm import BatchNormalizationAttrs, LRNAttrs
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import ConcatAttrs, FlattenAttrs, ReshapeAttrs, SplitAttrs


class Context(Protocol):
    name: str
    type: str
    params: Any  # the layer's message: LayerParameter or V1LayerParameter
    inputs: list[str]
    top_count: int

    def param(self, field: str) -> Any: ...

    def shape(self, tensor: str) -> Shape: ...

    def blob(self, index: int, kind: ParamKind, shape: tuple[int, ...]) -> str: ...

    def blob_value(self, index: int, kind: ParamKind, shape: tuple[int, ...]) -> np.ndarray: ...

    def constant(self, suffix: str, value: np.ndarray) -> str: ...

    def node(
        self, op: str, inputs: list[str], attrs: object, *, last: bool = False, outputs: int = 1
    ) -> list[str]: ...

    def fail(self, message: str) -> ModelFormatError: ...


Converter = Callable[[Context], list[str]]
CONVERTERS: dict[str, Converter] = {}


def converter(*types: str) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        for t in types:
            CONVERTERS[t] = fn
        return fn

    return register


def one(ctx: Context, op: str, inputs: list[str], attrs: object) -> list[str]:
    """The layer is a single node writing its top."""
    return ctx.node(op, inputs, attrs, last=True)


def channels(ctx: Context, tensor: str, axis: int = 1) -> int:
    shape = ctx.shape(tensor)
    size = shape[axis] if len(shape) > axis else None
    if not isinstance(size, int):
        raise ctx.fail(f"needs a known size on axis {axis} of its input, got {list(shape)}")
    return size


# ------------------------------------------------------------------ geometry
def repeated_or_hw(p: Any, name: str, rank: int, default: int) -> tuple[int, ...]:
    """Convolution geometry: ``name_h``/``name_w`` if set, else the repeated ``name`` (one value
    for every axis, or one per axis), else ``default``."""
    if rank == 2 and (p.HasField(f"{name}_h") or p.HasField(f"{name}_w")):
        return (getattr(p, f"{name}_h"), getattr(p, f"{name}_w"))
    values = tuple(getattr(p, "kernel_size" if name == "kernel" else name))
    if not values:
        return (default,) * rank
    if len(values) == 1:
        return values * rank
    if len(values) != rank:
        raise ValueError(f"{name} has {len(values)} values for {rank} spatial axes")
    return values


def single_or_hw(p: Any, name: str, default: int | None) -> tuple[int, int]:
    """Pooling geometry: ``name_h``/``name_w`` if set, else the single ``name``."""
    field = "kernel_size" if name == "kernel" else name
    if p.HasField(f"{name}_h") or p.HasField(f"{name}_w"):
        return (getattr(p, f"{name}_h"), getattr(p, f"{name}_w"))
    if p.HasField(field) or default is None:
        value = getattr(p, field)
        return (value, value)
    return (default, default)


class ConvGeometryArgs(TypedDict):
    """The geometry fields shared by ConvAttrs and ConvTransposeAttrs."""

    kernel_shape: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[int, ...]
    dilations: tuple[int, ...]


def conv_geometry(ctx: Context, p: Any, rank: int) -> ConvGeometryArgs:
    try:
        kernel = repeated_or_hw(p, "kernel", rank, 0)
        pads = repeated_or_hw(p, "pad", rank, 0)
        strides = repeated_or_hw(p, "stride", rank, 1)
        dilations = tuple(p.dilation) * (rank if len(p.dilation) == 1 else 1) or (1,) * rank
    except ValueError as exc:
        raise ctx.fail(str(exc)) from None
    if min(kernel) < 1 or min(strides) < 1 or min(dilations) < 1 or len(dilations) != rank:
        raise ctx.fail(
            f"kernel {kernel}, stride {strides} and dilation {dilations} must be positive, one per axis"
        )
    return {"kernel_shape": kernel, "strides": strides, "pads": pads + pads, "dilations": dilations}


# --------------------------------------------------------------- converters
@converter("Convolution", "Deconvolution")
def convolution(ctx: Context) -> list[str]:
    p = ctx.param("convolution_param")
    if p.axis != 1:
        raise ctx.fail(f"convolution over axis {p.axis} is not supported (only the channel axis 1)")
    x = ctx.inputs[0]
    rank = len(ctx.shape(x)) - 2
    in_channels, out_channels, group = channels(ctx, x), p.num_output, p.group
    if out_channels < 1 or group < 1 or in_channels % group or out_channels % group:
        raise ctx.fail(
            f"num_output {out_channels} and the input's {in_channels} channels must be positive multiples "
            f"of group {group}"
        )
    geometry = conv_geometry(ctx, p, rank)
    if ctx.type == "Convolution":
        weight_shape = (out_channels, in_channels // group, *geometry["kernel_shape"])
        attrs: object = ConvAttrs(group=group, **geometry)
        op = "Conv"
    else:
        weight_shape = (in_channels, out_channels // group, *geometry["kernel_shape"])
        attrs = ConvTransposeAttrs(group=group, **geometry)
        op = "ConvTranspose"
    inputs = [x, ctx.blob(0, ParamKind.WEIGHTS, weight_shape)]
    if p.bias_term:
        inputs.append(ctx.blob(1, ParamKind.BIASES, (out_channels,)))
    return one(ctx, op, inputs, attrs)


@converter("InnerProduct")
def inner_product(ctx: Context) -> list[str]:
    p = ctx.param("inner_product_param")
    x = ctx.inputs[0]
    if p.axis != 1:
        raise ctx.fail(f"InnerProduct over axis {p.axis} is not supported (only axis 1)")
    shape = ctx.shape(x)
    features = 1
    for d in shape[1:]:
        if not isinstance(d, int):
            raise ctx.fail(f"needs the input's feature dimensions known, got {list(shape)}")
        features *= d
    if p.num_output < 1:
        raise ctx.fail(f"num_output must be positive, got {p.num_output}")
    weight_shape = (features, p.num_output) if p.transpose else (p.num_output, features)
    inputs = [x if len(shape) == 2 else ctx.node("Flatten", [x], FlattenAttrs(axis=1))[0]]
    inputs.append(ctx.blob(0, ParamKind.WEIGHTS, weight_shape))
    if p.bias_term:
        inputs.append(ctx.blob(1, ParamKind.BIASES, (p.num_output,)))
    return one(ctx, "Gemm", inputs, GemmAttrs(trans_b=not p.transpose))


@converter("Pooling")
def pooling(ctx: Context) -> list[str]:
    p = ctx.param("pooling_param")
    x = ctx.inputs[0]
    method = p.DESCRIPTOR.fields_by_name["pool"].enum_type.values_by_number[p.pool].name
    if method not in ("MAX", "AVE"):
        raise ctx.fail(f"{method} pooling is not supported (MAX and AVE are)")
    if p.global_pooling:
        return one(ctx, "GlobalMaxPool" if method == "MAX" else "GlobalAveragePool", [x], NoAttrs())
    if len(ctx.shape(x)) != 4:
        raise ctx.fail(f"pooling needs a 4-D input, got {list(ctx.shape(x))}")
    kernel = single_or_hw(p, "kernel", None)
    pads = single_or_hw(p, "pad", 0)
    strides = single_or_hw(p, "stride", 1)
    if min(kernel) < 1 or min(strides) < 1:
        raise ctx.fail(f"kernel {kernel} and stride {strides} must be positive")
    geometry = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": pads + pads,
        "ceil_mode": p.round_mode == 0,
    }
    if method == "MAX":
        return one(ctx, "MaxPool", [x], MaxPoolAttrs(**geometry))
    return one(ctx, "AveragePool", [x], AveragePoolAttrs(count_include_pad=True, **geometry))


@converter("ReLU")
def relu(ctx: Context) -> list[str]:
    slope = ctx.param("relu_param").negative_slope
    if slope == 0:
        return one(ctx, "Relu", ctx.inputs[:1], NoAttrs())
    return one(ctx, "LeakyRelu", ctx.inputs[:1], LeakyReluAttrs(alpha=slope))


@converter("PReLU")
def prelu(ctx: Context) -> list[str]:
    x = ctx.inputs[0]
    shared = ctx.param("prelu_param").channel_shared
    count = 1 if shared else channels(ctx, x)
    slope = ctx.blob(0, ParamKind.SCALES, (count,))
    rank = len(ctx.shape(x))
    per_channel = ctx.node(
        "Reshape", [slope, ctx.constant("slope_shape", channel_shape(count, rank))], ReshapeAttrs()
    )
    return one(ctx, "PRelu", [x, per_channel[0]], NoAttrs())


def channel_shape(count: int, rank: int) -> np.ndarray:
    """Shape that broadcasts a per-channel vector over an (N, C, ...) tensor."""
    return np.asarray([count, *([1] * (rank - 2))] if rank > 2 else [count], np.int64)


@converter("Sigmoid", "TanH", "AbsVal")
def unary(ctx: Context) -> list[str]:
    op = {"Sigmoid": "Sigmoid", "TanH": "Tanh", "AbsVal": "Abs"}[ctx.type]
    return one(ctx, op, ctx.inputs[:1], NoAttrs())


@converter("ELU")
def elu(ctx: Context) -> list[str]:
    return one(ctx, "Elu", ctx.inputs[:1], AlphaAttrs(alpha=ctx.param("elu_param").alpha))


@converter("Power")
def power(ctx: Context) -> list[str]:
    """y = (shift + scale * x) ^ power, skipping the identity steps."""
    p = ctx.param("power_param")
    steps = [("Mul", p.scale, 1.0), ("Add", p.shift, 0.0), ("Pow", p.power, 1.0)]
    needed = [(op, value) for op, value, identity in steps if value != identity]
    if not needed:
        return one(ctx, "Identity", ctx.inputs[:1], NoAttrs())
    y = ctx.inputs[0]
    for index, (op, value) in enumerate(needed):
        operand = ctx.constant(op.lower(), np.asarray(value, np.float32))
        y = ctx.node(op, [y, operand], NoAttrs(), last=index == len(needed) - 1)[0]
    return [y]


@converter("LRN")
def lrn(ctx: Context) -> list[str]:
    p = ctx.param("lrn_param")
    if p.local_size % 2 == 0:
        raise ctx.fail(f"local_size must be odd, got {p.local_size}")
    x = ctx.inputs[0]
    if p.norm_region == 0:  # ACROSS_CHANNELS: x / (k + alpha / n * sum of squares over n channels) ^ beta
        return one(ctx, "LRN", [x], LRNAttrs(size=p.local_size, alpha=p.alpha, beta=p.beta, bias=p.k))
    # WITHIN_CHANNEL: x * (1 + alpha * mean of squares over an n x n window) ^ -beta
    pad = (p.local_size - 1) // 2
    squares = ctx.node("Mul", [x, x], NoAttrs())[0]
    window = AveragePoolAttrs(
        kernel_shape=(p.local_size,) * 2, strides=(1, 1), pads=(pad,) * 4, count_include_pad=True
    )
    mean = ctx.node("AveragePool", [squares], window)[0]
    scaled = ctx.node("Mul", [mean, ctx.constant("alpha", np.asarray(p.alpha, np.float32))], NoAttrs())[0]
    shifted = ctx.node("Add", [scaled, ctx.constant("one", np.asarray(1.0, np.float32))], NoAttrs())[0]
    factor = ctx.node("Pow", [shifted, ctx.constant("beta", np.asarray(-p.beta, np.float32))], NoAttrs())[0]
    return one(ctx, "Mul", [x, factor], NoAttrs())


@converter("Softmax")
def softmax(ctx: Context) -> list[str]:
    return one(ctx, "Softmax", ctx.inputs[:1], SoftmaxAttrs(axis=ctx.param("softmax_param").axis))


@converter("Dropout", "Split")
def alias(ctx: Context) -> list[str]:
    """Inference-time identities: every top is the bottom itself."""
    return [ctx.inputs[0]] * ctx.top_count


@converter("Concat")
def concat(ctx: Context) -> list[str]:
    p = ctx.param("concat_param")
    axis = p.axis if p.HasField("axis") or not p.HasField("concat_dim") else p.concat_dim
    return one(ctx, "Concat", ctx.inputs, ConcatAttrs(axis=axis))


@converter("Slice")
def slice_layer(ctx: Context) -> list[str]:
    p = ctx.param("slice_param")
    axis = p.axis if p.HasField("axis") or not p.HasField("slice_dim") else p.slice_dim
    x = ctx.inputs[0]
    length = channels(ctx, x, axis)
    count = ctx.top_count
    attrs = SplitAttrs(axis=axis, num_outputs=count)
    if not p.slice_point:
        if length % count:
            raise ctx.fail(f"cannot slice {length} into {count} equal parts")
        return ctx.node("Split", [x], attrs, last=True, outputs=count)
    points = [0, *p.slice_point, length]
    sizes = [b - a for a, b in itertools.pairwise(points)]
    if len(sizes) != count or min(sizes) < 1:
        raise ctx.fail(
            f"slice_point {list(p.slice_point)} does not cut {length} into {count} non-empty parts"
        )
    split = ctx.constant("split", np.asarray(sizes, np.int64))
    return ctx.node("Split", [x, split], attrs, last=True, outputs=count)


@converter("Eltwise")
def eltwise(ctx: Context) -> list[str]:
    p = ctx.param("eltwise_param")
    inputs = ctx.inputs
    if p.coeff and (p.operation != 1 or len(p.coeff) != len(inputs)):
        raise ctx.fail(
            f"coeff needs the SUM operation and one value per bottom ({len(inputs)}), got {list(p.coeff)}"
        )
    if p.operation == 0:
        return one(ctx, "Mul", inputs, NoAttrs()) if len(inputs) == 2 else chain(ctx, "Mul", inputs)
    if p.operation == 2:
        return one(ctx, "Max", inputs, NoAttrs())
    if any(c != 1 for c in p.coeff):
        inputs = [
            x
            if c == 1
            else ctx.node("Mul", [x, ctx.constant(f"coeff{i}", np.asarray(c, np.float32))], NoAttrs())[0]
            for i, (x, c) in enumerate(zip(inputs, p.coeff))
        ]
    return one(ctx, "Sum", inputs, NoAttrs())


def chain(ctx: Context, op: str, inputs: list[str]) -> list[str]:
    y = inputs[0]
    for index, x in enumerate(inputs[1:]):
        y = ctx.node(op, [y, x], NoAttrs(), last=index == len(inputs) - 2)[0]
    return [y]


@converter("BatchNorm")
def batch_norm(ctx: Context) -> list[str]:
    """Caffe keeps running sums: mean and variance are the blobs divided by the factor blob."""
    p = ctx.param("batch_norm_param")
    x = ctx.inputs[0]
    count = channels(ctx, x)
    mean = ctx.blob_value(0, ParamKind.ROLLING_MEAN, (count,))
    variance = ctx.blob_value(1, ParamKind.ROLLING_VARIANCE, (count,))
    factor = ctx.blob_value(2, ParamKind.SCALES, (1,))
    scale = 0.0 if factor[0] == 0 else 1.0 / float(factor[0])
    inputs = [
        x,
        ctx.constant("scale", np.ones(count, np.float32)),
        ctx.constant("bias", np.zeros(count, np.float32)),
        ctx.constant("mean", (mean * scale).astype(np.float32)),
        ctx.constant("var", (variance * scale).astype(np.float32)),
    ]
    return one(ctx, "BatchNormalization", inputs, BatchNormalizationAttrs(epsilon=p.eps))


@converter("Scale")
def scale(ctx: Context) -> list[str]:
    p = ctx.param("scale_param")
    if len(ctx.inputs) != 1:
        raise ctx.fail("Scale with the factor as a second bottom is not supported")
    x = ctx.inputs[0]
    shape = ctx.shape(x)
    rank = len(shape)
    axis = p.axis % rank if rank else 0
    end = rank if p.num_axes == -1 else axis + p.num_axes
    dims = shape[axis:end]
    known = [d for d in dims if isinstance(d, int)]
    if len(known) != len(dims) or end > rank:
        raise ctx.fail(f"axis {p.axis} and num_axes {p.num_axes} do not select known dims of {list(shape)}")
    blob_shape = tuple(known)
    broadcast = np.asarray([*blob_shape, *([1] * (rank - end))] or [1], np.int64)
    factor = ctx.node(
        "Reshape",
        [ctx.blob(0, ParamKind.SCALES, blob_shape), ctx.constant("shape", broadcast)],
        ReshapeAttrs(),
    )[0]
    if not p.bias_term:
        return one(ctx, "Mul", [x, factor], NoAttrs())
    product = ctx.node("Mul", [x, factor], NoAttrs())[0]
    bias = ctx.node(
        "Reshape",
        [ctx.blob(1, ParamKind.BIASES, blob_shape), ctx.constant("bias_shape", broadcast)],
        ReshapeAttrs(),
    )[0]
    return one(ctx, "Add", [product, bias], NoAttrs())


@converter("Flatten")
def flatten(ctx: Context) -> list[str]:
    """Caffe merges axes axis..end_axis and keeps the others (ONNX Flatten always gives 2-D)."""
    p = ctx.param("flatten_param")
    x = ctx.inputs[0]
    shape = ctx.shape(x)
    rank = len(shape)
    axis, end = p.axis % rank, p.end_axis % rank
    if axis == 1 and end == rank - 1:
        return one(ctx, "Flatten", [x], FlattenAttrs(axis=1))
    trailing = shape[end + 1 :]
    known = [d for d in trailing if isinstance(d, int)]
    if len(known) != len(trailing) or end < axis:
        raise ctx.fail(f"axis {p.axis} and end_axis {p.end_axis} do not select known dims of {list(shape)}")
    target = [0] * axis + [-1] + known
    return one(ctx, "Reshape", [x, ctx.constant("shape", np.asarray(target, np.int64))], ReshapeAttrs())


@converter("Reshape")
def reshape(ctx: Context) -> list[str]:
    """Caffe's 0 (copy the dim) and -1 (infer it) mean what ONNX Reshape's do."""
    p = ctx.param("reshape_param")
    if p.axis != 0 or p.num_axes != -1:
        raise ctx.fail("Reshape with axis/num_axes is not supported; give the full shape")
    target = np.asarray(list(p.shape.dim), np.int64)
    return one(ctx, "Reshape", [ctx.inputs[0], ctx.constant("shape", target)], ReshapeAttrs())
