"""Node constructors for the edgecnn operators the Darknet importer uses.

Each takes the layer's context (which names and collects nodes and constants) and returns the
output tensor's name, so converters read as Darknet's formulas.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from edgecnn.errors import ModelFormatError
from edgecnn.ops.activation import LeakyReluAttrs, SoftmaxAttrs
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.norm import BatchNormalizationAttrs
from edgecnn.ops.pool import MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.resize import ResizeAttrs
from edgecnn.ops.shape import ConcatAttrs, FlattenAttrs, ReshapeAttrs, TransposeAttrs


class Context(Protocol):
    def add(self, op: str, suffix: str, inputs: list[str], attrs: object) -> str: ...

    def constant(self, suffix: str, value: np.ndarray | np.generic) -> str: ...

    def fail(self, message: str, key: str | None = None) -> ModelFormatError: ...


def conv(ctx: Context, inputs: list[str], size: int, stride: int, padding: int, groups: int) -> str:
    attrs = ConvAttrs(kernel_shape=(size, size), strides=(stride, stride), pads=(padding,) * 4, group=groups)
    return ctx.add("Conv", "conv", inputs, attrs)


def batch_norm(ctx: Context, x: str, params: list[str], epsilon: float) -> str:
    return ctx.add("BatchNormalization", "bn", [x, *params], BatchNormalizationAttrs(epsilon=epsilon))


def gemm(ctx: Context, inputs: list[str]) -> str:
    """x @ W.T (+ B): Darknet stores connected weights as (outputs, inputs)."""
    return ctx.add("Gemm", "gemm", inputs, GemmAttrs(trans_b=True))


def flatten(ctx: Context, x: str) -> str:
    return ctx.add("Flatten", "flatten", [x], FlattenAttrs(axis=1))


def max_pool(ctx: Context, x: str, size: int, stride: int, before: int, after: int) -> str:
    attrs = MaxPoolAttrs(
        kernel_shape=(size, size), strides=(stride, stride), pads=(before, before, after, after)
    )
    return ctx.add("MaxPool", "pool", [x], attrs)


def global_average_pool(ctx: Context, x: str) -> str:
    return ctx.add("GlobalAveragePool", "pool", [x], NoAttrs())


def softmax(ctx: Context, x: str) -> str:
    return ctx.add("Softmax", "softmax", [x], SoftmaxAttrs(axis=-1))


def binary(ctx: Context, op: str, suffix: str, a: str, b: str) -> str:
    return ctx.add(op, suffix, [a, b], NoAttrs())


def reshape(ctx: Context, suffix: str, x: str, shape: tuple[int, ...]) -> str:
    """Reshape; a 0 keeps that input dimension (the batch)."""
    target = ctx.constant(f"{suffix}_shape", np.asarray(shape, np.int64))
    return ctx.add("Reshape", suffix, [x, target], ReshapeAttrs())


def transpose(ctx: Context, x: str, perm: tuple[int, ...]) -> str:
    return ctx.add("Transpose", "transpose", [x], TransposeAttrs(perm=perm))


def concat(ctx: Context, parts: list[str]) -> str:
    return ctx.add("Concat", "concat", parts, ConcatAttrs(axis=1))


def channel_slice(ctx: Context, suffix: str, x: str, start: int, end: int) -> str:
    starts = ctx.constant(f"{suffix}_starts", np.asarray([start], np.int64))
    ends = ctx.constant(f"{suffix}_ends", np.asarray([end], np.int64))
    axes = ctx.constant(f"{suffix}_axes", np.asarray([1], np.int64))
    return ctx.add("Slice", suffix, [x, starts, ends, axes], NoAttrs())


def upsample_nearest(ctx: Context, x: str, stride: int) -> str:
    """Darknet's upsample copies each pixel into a stride x stride block."""
    scales = ctx.constant("scales", np.asarray([1, 1, stride, stride], np.float32))
    attrs = ResizeAttrs(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    return ctx.add("Resize", "resize", [x, "", scales], attrs)


def activation(ctx: Context, x: str, name: str) -> str:
    """Darknet activations; ``swish`` is x * sigmoid(x), ``mish`` x * tanh(softplus(x))."""
    if name == "linear":
        return x
    if name == "leaky":
        return ctx.add("LeakyRelu", "leaky", [x], LeakyReluAttrs(alpha=0.1))
    simple = {"relu": "Relu", "logistic": "Sigmoid", "tanh": "Tanh", "mish": "Mish"}
    if name in simple:
        return ctx.add(simple[name], name, [x], NoAttrs())
    if name == "swish":
        return binary(ctx, "Mul", "swish", x, ctx.add("Sigmoid", "sigmoid", [x], NoAttrs()))
    supported = "linear, leaky, relu, logistic, tanh, mish, swish"
    raise ctx.fail(f"activation '{name}' is not supported (supported: {supported})", "activation")
