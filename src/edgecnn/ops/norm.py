"""Normalisation for inference: batch, instance and layer normalisation, local response norm."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import TensorType
from edgecnn.ops.common import check, first_type, normalize_axis, same_as_first
from edgecnn.ops.registry import register_op
from edgecnn.ops.traits import broadcast_per_image


@dataclass(frozen=True)
class BatchNormalizationAttrs:
    epsilon: float = 1e-5


def _channel_shape(x: np.ndarray) -> tuple[int, ...]:
    return (-1, *([1] * (x.ndim - 2))) if x.ndim > 1 else (-1,)


def infer_batch_norm(attrs: object, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    x = first_type(types)
    channels = x.shape[1] if x.shape is not None and len(x.shape) > 1 else None
    for role, t in zip(("scale", "bias", "mean", "var"), types[1:]):
        check(t is not None, f"{role} is required")
        assert t is not None
        if isinstance(channels, int) and t.is_concrete:
            check(
                int(np.prod(t.dims)) == channels,
                f"{role} has shape {list(t.dims)} but the input has {channels} channels",
            )
    return [x]


@register_op(
    "BatchNormalization",
    attrs=BatchNormalizationAttrs,
    infer=infer_batch_norm,
    inputs=5,
    per_sample=broadcast_per_image,
)
def batch_normalization(
    attrs: BatchNormalizationAttrs,
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
) -> np.ndarray:
    """Inference form with running statistics: (x - mean) / sqrt(var + eps) * scale + bias."""
    shape = _channel_shape(x)
    factor = scale / np.sqrt(var.astype(np.float64) + attrs.epsilon)
    shift = bias - mean * factor
    return (x * factor.astype(x.dtype).reshape(shape) + shift.astype(x.dtype).reshape(shape)).astype(x.dtype)


@dataclass(frozen=True)
class InstanceNormalizationAttrs:
    epsilon: float = 1e-5


@register_op(
    "InstanceNormalization",
    attrs=InstanceNormalizationAttrs,
    infer=same_as_first,
    inputs=3,
    per_sample=broadcast_per_image,
)
def instance_normalization(
    attrs: InstanceNormalizationAttrs, x: np.ndarray, scale: np.ndarray, bias: np.ndarray
) -> np.ndarray:
    axes = tuple(range(2, x.ndim))
    work = x.astype(np.float64)
    mean = work.mean(axis=axes, keepdims=True)
    var = work.var(axis=axes, keepdims=True)
    shape = _channel_shape(x)
    y = (work - mean) / np.sqrt(var + attrs.epsilon) * scale.reshape(shape) + bias.reshape(shape)
    return y.astype(x.dtype)


@dataclass(frozen=True)
class LayerNormalizationAttrs:
    axis: int = -1
    epsilon: float = 1e-5


def infer_layer_norm(
    attrs: LayerNormalizationAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    x = first_type(types)
    if x.shape is None:
        return [x, TensorType("float32", None), TensorType("float32", None)]
    axis = normalize_axis(attrs.axis, len(x.shape))
    reduced = (*x.shape[:axis], *([1] * (len(x.shape) - axis)))
    return [x, TensorType("float32", reduced), TensorType("float32", reduced)]


@register_op(
    "LayerNormalization", attrs=LayerNormalizationAttrs, infer=infer_layer_norm, inputs=(2, 3), outputs=(1, 3)
)
def layer_normalization(
    attrs: LayerNormalizationAttrs, x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    axes = tuple(range(normalize_axis(attrs.axis, x.ndim), x.ndim))
    work = x.astype(np.float64)
    mean = work.mean(axis=axes, keepdims=True)
    inv_std = 1.0 / np.sqrt(work.var(axis=axes, keepdims=True) + attrs.epsilon)
    y = (work - mean) * inv_std * scale
    if bias is not None:
        y = y + bias
    return y.astype(x.dtype), mean.astype(np.float32), inv_std.astype(np.float32)


@dataclass(frozen=True)
class LRNAttrs:
    """ONNX/Caffe ACROSS_CHANNELS: x / (bias + alpha / size * sum of squares over ``size`` channels) ** beta."""

    size: int
    alpha: float = 1e-4
    beta: float = 0.75
    bias: float = 1.0


def infer_lrn(attrs: LRNAttrs, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    check(attrs.size >= 1, f"size must be >= 1, got {attrs.size}")
    x = first_type(types)
    check(x.rank is None or x.rank >= 2, f"input must be (N, C, ...), got {x}")
    return [x]


@register_op("LRN", attrs=LRNAttrs, infer=infer_lrn, per_sample=broadcast_per_image)
def lrn(attrs: LRNAttrs, x: np.ndarray) -> np.ndarray:
    squares = np.square(x.astype(np.float64))
    before, after = (attrs.size - 1) // 2, attrs.size - 1 - (attrs.size - 1) // 2
    padded = np.pad(squares, [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2))
    cumulative = np.concatenate([np.zeros_like(padded[:, :1]), np.cumsum(padded, axis=1)], axis=1)
    window_sum = cumulative[:, attrs.size :] - cumulative[:, : -attrs.size]
    scale = (attrs.bias + attrs.alpha / attrs.size * window_sum) ** attrs.beta
    return (x / scale).astype(x.dtype)
