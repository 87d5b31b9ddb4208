"""Activation functions, Clip (ReLU6) and the softmax family.

The ones a fused step can apply declare it (``FusableActivation``, whose code is their number in
compiled epilogues: see edgecnn.ops.fused.ACTIVATIONS)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import TensorType
from edgecnn.ops.common import broadcast_shapes, check, first_type, input_type, normalize_axis, same_as_first
from edgecnn.ops.registry import FusableActivation, IntoAdapter, NoAttrs, register_op
from edgecnn.ops.traits import axis_not_batch, broadcast_per_image, one_dtype


def _as(x: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Results keep the input's element type (numpy would promote float32 * python float)."""
    return np.asarray(value).astype(x.dtype, copy=False)


def relu_into(
    attrs: NoAttrs, in_types: Sequence[TensorType | None], out_types: Sequence[TensorType]
) -> IntoAdapter | None:
    """ReLU as ``np.maximum(x, 0, out=)``, in place over its input."""
    if not one_dtype(*in_types, *out_types):
        return None
    zero = np.zeros((), dtype=out_types[0].dtype)

    def run(out: np.ndarray, x: np.ndarray) -> None:
        np.maximum(x, zero, out=out)

    return IntoAdapter(run, (0,))


@register_op(
    "Relu",
    infer=same_as_first,
    per_sample=broadcast_per_image,
    reference_into=relu_into,
    activations=[FusableActivation("relu", 1)],
)
def relu(attrs: NoAttrs, x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.zeros((), x.dtype))


@dataclass(frozen=True)
class LeakyReluAttrs:
    alpha: float = 0.01


@register_op(
    "LeakyRelu",
    attrs=LeakyReluAttrs,
    infer=same_as_first,
    per_sample=broadcast_per_image,
    activations=[FusableActivation("leaky_relu", 2, from_attrs=(("negative_slope", "alpha"),))],
)
def leaky_relu(attrs: LeakyReluAttrs, x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, x, x * x.dtype.type(attrs.alpha))


def prelu_slope_shape(x_shape: tuple, slope_shape: tuple) -> tuple:
    """Numpy broadcasting, or one slope per channel (axis 1) as Caffe and ONNX before
    opset 7 store it: shape [C] for an (N, C, ...) input."""
    if (
        len(slope_shape) == 1
        and len(x_shape) > 2
        and slope_shape[0] == x_shape[1]
        and slope_shape[0] != x_shape[-1]
    ):
        return (slope_shape[0], *([1] * (len(x_shape) - 2)))
    return slope_shape


def infer_prelu(attrs: object, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    x, slope = first_type(types), input_type(types, 1, "slope")
    if x.shape is not None and slope.shape is not None:
        shape = broadcast_shapes(x.shape, prelu_slope_shape(x.shape, slope.shape))
        check(shape is not None and len(shape) == len(x.shape), f"slope {slope} does not broadcast to {x}")
    return [x]


@register_op("PRelu", infer=infer_prelu, inputs=2, per_sample=broadcast_per_image)
def prelu(attrs: NoAttrs, x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    slope = slope.reshape(prelu_slope_shape(x.shape, slope.shape)).astype(x.dtype)
    return _as(x, np.where(x >= 0, x, x * slope))


@dataclass(frozen=True)
class AlphaAttrs:
    """One coefficient (Elu, Celu, ThresholdedRelu)."""

    alpha: float = 1.0


@register_op("Elu", attrs=AlphaAttrs, infer=same_as_first, per_sample=broadcast_per_image)
def elu(attrs: AlphaAttrs, x: np.ndarray) -> np.ndarray:
    return _as(x, np.where(x > 0, x, attrs.alpha * np.expm1(np.minimum(x, 0))))


@register_op("Celu", attrs=AlphaAttrs, infer=same_as_first, per_sample=broadcast_per_image)
def celu(attrs: AlphaAttrs, x: np.ndarray) -> np.ndarray:
    return _as(x, np.maximum(x, 0) + np.minimum(0, attrs.alpha * np.expm1(np.minimum(x, 0) / attrs.alpha)))


@register_op("ThresholdedRelu", attrs=AlphaAttrs, infer=same_as_first, per_sample=broadcast_per_image)
def thresholded_relu(attrs: AlphaAttrs, x: np.ndarray) -> np.ndarray:
    return np.where(x > attrs.alpha, x, np.zeros((), x.dtype))


@dataclass(frozen=True)
class SeluAttrs:
    alpha: float = 1.67326319217681884765625
    gamma: float = 1.05070102214813232421875


@register_op("Selu", attrs=SeluAttrs, infer=same_as_first, per_sample=broadcast_per_image)
def selu(attrs: SeluAttrs, x: np.ndarray) -> np.ndarray:
    return _as(x, attrs.gamma * np.where(x > 0, x, attrs.alpha * np.expm1(np.minimum(x, 0))))


@dataclass(frozen=True)
class HardSigmoidAttrs:
    alpha: float = 0.2
    beta: float = 0.5


@register_op(
    "HardSigmoid",
    attrs=HardSigmoidAttrs,
    infer=same_as_first,
    per_sample=broadcast_per_image,
    activations=[FusableActivation("hard_sigmoid", 7, from_attrs=(("scale", "alpha"), ("offset", "beta")))],
)
def hard_sigmoid(attrs: HardSigmoidAttrs, x: np.ndarray) -> np.ndarray:
    return _as(x, np.clip(attrs.alpha * x + attrs.beta, 0, 1))


def sigmoid_of(x: np.ndarray) -> np.ndarray:
    """Overflow-free logistic function."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def softplus_of(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


_erf = np.frompyfunc(math.erf, 1, 1)


def erf_of(x: np.ndarray) -> np.ndarray:
    # the ufunc gives a bare float for a 0-d input, an object array for any other
    return np.asarray(_erf(x.astype(np.float64)), dtype=np.float64)


UNARY_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Sigmoid": sigmoid_of,
    "Tanh": np.tanh,
    "HardSwish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
    "Softplus": softplus_of,
    "Softsign": lambda x: x / (1 + np.abs(x)),
    "Mish": lambda x: x * np.tanh(softplus_of(x)),
}


_FUSABLE_UNARY = {
    "Sigmoid": (FusableActivation("sigmoid", 4), FusableActivation("silu", 6, gated=True)),
    "HardSwish": (FusableActivation("hard_swish", 5),),
}
"""How fused steps apply the unary activations that they can: SiLU is x * Sigmoid(x)."""


def _register_unary(name: str, fn: Callable[[np.ndarray], np.ndarray]) -> None:
    def reference(attrs: NoAttrs, x: np.ndarray) -> np.ndarray:
        return _as(x, fn(x))

    reference.__name__ = name.lower()
    register_op(
        name, infer=same_as_first, per_sample=broadcast_per_image, activations=_FUSABLE_UNARY.get(name, ())
    )(reference)


for _name, _fn in UNARY_ACTIVATIONS.items():
    _register_unary(_name, _fn)


@dataclass(frozen=True)
class GeluAttrs:
    approximate: str = "none"  # or "tanh"


@register_op("Gelu", attrs=GeluAttrs, infer=same_as_first, per_sample=broadcast_per_image)
def gelu(attrs: GeluAttrs, x: np.ndarray) -> np.ndarray:
    check(
        attrs.approximate in ("none", "tanh"),
        f"approximate must be 'none' or 'tanh', got {attrs.approximate!r}",
    )
    if attrs.approximate == "tanh":
        return _as(x, 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))))
    return _as(x, 0.5 * x * (1 + erf_of(x / math.sqrt(2))))


def infer_clip(attrs: object, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    x = first_type(types)
    for bound in types[1:]:
        if bound is not None and bound.shape is not None:
            check(len(bound.shape) == 0 or bound.shape == (1,), f"Clip bounds must be scalars, got {bound}")
    return [x]


@register_op(
    "Clip",
    infer=infer_clip,
    inputs=(1, 3),
    per_sample=broadcast_per_image,
    activations=[FusableActivation("clip", 3, from_inputs=(("low", 1), ("high", 2)))],
)
def clip(
    attrs: NoAttrs, x: np.ndarray, low: np.ndarray | None = None, high: np.ndarray | None = None
) -> np.ndarray:
    """ReLU6 is Clip(x, 0, 6); omitted bounds are open."""
    y = x
    if low is not None:
        y = np.maximum(y, low.reshape(()).astype(x.dtype))
    if high is not None:
        y = np.minimum(y, high.reshape(()).astype(x.dtype))
    # np.maximum of 0-d arrays gives a numpy scalar: asarray makes it an array again.
    return x.copy() if y is x else np.asarray(y, dtype=x.dtype)


@dataclass(frozen=True)
class SoftmaxAttrs:
    """Normalise over ``axis`` (opset >= 13), or over all axes from ``axis`` on when
    ``coerce_2d`` (opsets < 13 flattened the input to 2-D at ``axis``)."""

    axis: int = -1
    coerce_2d: bool = False


def infer_softmax(
    attrs: SoftmaxAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    x = first_type(types)
    if x.rank is not None:
        normalize_axis(attrs.axis, max(x.rank, 1))
    return [x]


def softmax_axes(attrs: SoftmaxAttrs, rank: int) -> tuple[int, ...]:
    axis = normalize_axis(attrs.axis, max(rank, 1))
    return tuple(range(axis, rank)) if attrs.coerce_2d else (axis,)


def softmax_into(
    attrs: SoftmaxAttrs, in_types: Sequence[TensorType | None], out_types: Sequence[TensorType]
) -> IntoAdapter | None:
    """The reference's arithmetic in place over its input, for floats; only the per-row max and
    sum are allocated."""
    out = out_types[0]
    if np.dtype(out.dtype).kind != "f":
        return None
    axes = softmax_axes(attrs, len(out.dims))

    def run(result: np.ndarray, x: np.ndarray) -> None:
        np.subtract(x, x.max(axis=axes, keepdims=True), out=result)
        np.exp(result, out=result)
        np.divide(result, result.sum(axis=axes, keepdims=True), out=result)

    return IntoAdapter(run, (0,))


@register_op(
    "Softmax", attrs=SoftmaxAttrs, infer=infer_softmax, per_sample=axis_not_batch, reference_into=softmax_into
)
def softmax(attrs: SoftmaxAttrs, x: np.ndarray) -> np.ndarray:
    axes = softmax_axes(attrs, x.ndim)
    e = np.exp(x - x.max(axis=axes, keepdims=True))
    return _as(x, e / e.sum(axis=axes, keepdims=True))


@register_op("LogSoftmax", attrs=SoftmaxAttrs, infer=infer_softmax, per_sample=axis_not_batch)
def log_softmax(attrs: SoftmaxAttrs, x: np.ndarray) -> np.ndarray:
    axes = softmax_axes(attrs, x.ndim)
    shifted = x - x.max(axis=axes, keepdims=True)
    return _as(x, shifted - np.log(np.exp(shifted).sum(axis=axes, keepdims=True)))


@register_op("Hardmax", attrs=SoftmaxAttrs, infer=infer_softmax, per_sample=axis_not_batch)
def hardmax(attrs: SoftmaxAttrs, x: np.ndarray) -> np.ndarray:
    axes = softmax_axes(attrs, x.ndim)
    moved = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim))
    flat = moved.reshape(*moved.shape[: x.ndim - len(axes)], -1)
    one_hot = np.zeros_like(flat)
    np.put_along_axis(one_hot, flat.argmax(axis=-1)[..., None], 1, axis=-1)
    return np.moveaxis(one_hot.reshape(moved.shape), range(x.ndim - len(axes), x.ndim), axes)
