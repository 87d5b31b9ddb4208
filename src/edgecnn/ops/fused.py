"""Fused operators that the optimisation passes create: a convolution or dense layer with its
bias and activation applied in one step (seed 004: fuse conv + bias + ReLU, so the output is
written once), and a convolution that also adds a residual before its activation (ResNet's
conv + Add + ReLU). Their reference kernels are the unfused ops in sequence."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from edgecnn.ir.graph import Node, Shape, TensorType
from edgecnn.ops.activation import sigmoid_of
from edgecnn.ops.common import check
from edgecnn.ops.conv import ConvAttrs, conv, infer_conv
from edgecnn.ops.dense import GemmAttrs, gemm, infer_gemm
from edgecnn.ops.registry import register_op

ACTIVATIONS = ("none", "relu", "leaky_relu", "clip", "sigmoid", "hard_swish", "silu")
"""What a fused step may apply to its output; the order matches the compiled epilogue's codes."""


@dataclass(frozen=True)
class FusedActivation:
    """``activation`` with its parameters: ``negative_slope`` (leaky_relu), ``low``/``high`` (clip).

    Field names must not clash with the layer attrs they are combined with (Gemm has ``alpha``)."""

    activation: str = "none"
    negative_slope: float = 0.01
    low: float = -math.inf
    high: float = math.inf

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"unknown fused activation {self.activation!r} (known: {', '.join(ACTIVATIONS)})"
            )

    def apply(self, y: np.ndarray) -> np.ndarray:
        """The numpy reference of the activation, in y's dtype."""
        kind = self.activation
        if kind == "relu":
            out = np.maximum(y, 0)
        elif kind == "leaky_relu":
            out = np.where(y >= 0, y, y * y.dtype.type(self.negative_slope))
        elif kind == "clip":
            out = np.clip(y, self.low, self.high)
        elif kind == "sigmoid":
            out = sigmoid_of(y)
        elif kind == "hard_swish":
            out = y * np.clip(y / 6 + 0.5, 0, 1)
        elif kind == "silu":
            out = y * sigmoid_of(y)
        else:
            out = y
        return np.asarray(out, dtype=y.dtype)


@dataclass(frozen=True)
class FusedConvAttrs(ConvAttrs, FusedActivation):
    """Conv attributes plus the activation applied to its output."""


@dataclass(frozen=True)
class FusedGemmAttrs(GemmAttrs, FusedActivation):
    """Gemm attributes plus the activation applied to its output."""


def infer_fused_conv(
    attrs: FusedConvAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    return infer_conv(attrs, types, values)


def infer_fused_gemm(
    attrs: FusedGemmAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    return infer_gemm(attrs, types, values)


@register_op("FusedConv", attrs=FusedConvAttrs, infer=infer_fused_conv, inputs=(2, 3))
def fused_conv(
    attrs: FusedConvAttrs, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
) -> np.ndarray:
    return attrs.apply(conv(attrs, x, w, b))


@register_op("FusedGemm", attrs=FusedGemmAttrs, infer=infer_fused_gemm, inputs=(2, 3))
def fused_gemm(
    attrs: FusedGemmAttrs, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None
) -> np.ndarray:
    return attrs.apply(gemm(attrs, a, b, c))


def residual_fits(z: Shape, out: Shape) -> bool:
    """Whether a residual of shape ``z`` broadcasts to ``out`` without enlarging it (dims that are
    symbolic or unknown on one side pass: they are checked again once shapes are concrete)."""
    if len(z) > len(out):
        return False
    for zd, od in zip(reversed(z), reversed(out)):
        if zd != 1 and zd != od and isinstance(zd, int) and isinstance(od, int):
            return False
    return True


def infer_fused_conv_add(
    attrs: FusedConvAttrs, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> list[TensorType]:
    (out,) = infer_conv(attrs, types[:3], values[:3])
    z = types[3]
    check(z is not None, "the residual input (input 3) is required")
    check(z.dtype == out.dtype, f"residual {z} does not have the convolution's dtype {out.dtype}")  # type: ignore[union-attr]
    if z.shape is not None and out.shape is not None:  # type: ignore[union-attr]
        check(
            residual_fits(z.shape, out.shape),  # type: ignore[union-attr]
            f"residual {z} does not broadcast to the convolution's output {out}",
        )
    return [out]


@register_op("FusedConvAdd", attrs=FusedConvAttrs, infer=infer_fused_conv_add, inputs=4)
def fused_conv_add(
    attrs: FusedConvAttrs, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, z: np.ndarray
) -> np.ndarray:
    """act(conv(x, w, b) + z): inputs (x, w, b or omitted, z), z the residual branch."""
    return attrs.apply(np.asarray(conv(attrs, x, w, b) + z, dtype=x.dtype))


def residual_conv_node(node: Node) -> Node:
    """A FusedConvAdd's convolution alone: a FusedConv without activation over its first inputs
    (x, w and the bias if present), writing the same output. Kernels run it, then add z."""
    attrs = FusedConvAttrs(**{f.name: getattr(node.attrs, f.name) for f in fields(ConvAttrs)})
    count = 3 if len(node.inputs) > 2 and node.inputs[2] else 2
    return Node("FusedConv", node.name, list(node.inputs[:count]), list(node.outputs), attrs)
