"""Fused operators that the optimisation passes create: a convolution or dense layer with its
bias and activation applied in one step (seed 004: fuse conv + bias + ReLU, so the output is
written once), and a convolution that also adds a residual before its activation (ResNet's
conv + Add + ReLU). Their reference kernels are the unfused ops in sequence.

The activations a fused step may apply are those the activation ops declare
(``FusableActivation`` at their ``register_op``); ``ACTIVATIONS`` lists their names."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from edgecnn.ir.graph import Node, Shape, TensorType
from edgecnn.ops.common import check, input_type
from edgecnn.ops.conv import ConvAttrs, conv, conv_weight, infer_conv
from edgecnn.ops.dense import GemmAttrs, gemm, gemm_per_sample, gemm_weight, infer_gemm
from edgecnn.ops.registry import StepShapes, fusable_activation, fusable_activations, register_op
from edgecnn.ops.traits import conv_macs, each_image, gemm_macs


def activation_names() -> tuple[str, ...]:
    """ "none", then every fusable activation in code order: the codes compiled epilogues use."""
    return ("none", *(a.name for a in fusable_activations()))


def __getattr__(name: str) -> tuple[str, ...]:
    """``ACTIVATIONS``: ``activation_names()`` read from the registry when asked, so that it
    lists every activation op registered by then."""
    if name == "ACTIVATIONS":
        return activation_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class FusedActivation:
    """``activation`` with its parameters: ``negative_slope`` (leaky_relu), ``low``/``high`` (clip),
    ``scale``/``offset`` (hard_sigmoid: clip(scale * x + offset, 0, 1)).

    These fields are the parameter vocabulary every fusable activation maps its own onto
    (``FusableActivation.from_attrs``); one whose parameters none of them means extends it here.
    Field names must not clash with the layer attrs they are combined with (Gemm has ``alpha``,
    ``beta``)."""

    activation: str = "none"
    negative_slope: float = 0.01
    low: float = -math.inf
    high: float = math.inf
    scale: float = 1.0
    offset: float = 0.0

    def __post_init__(self) -> None:
        if self.activation != "none" and fusable_activation(self.activation) is None:
            raise ValueError(
                f"unknown fused activation {self.activation!r} (known: {', '.join(activation_names())})"
            )

    def apply(self, y: np.ndarray) -> np.ndarray:
        """The numpy reference of the activation (its op's own reference), in y's dtype."""
        definition = fusable_activation(self.activation)
        return np.asarray(y, dtype=y.dtype) if definition is None else definition.apply(self, y)


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


@register_op(
    "FusedConv",
    attrs=FusedConvAttrs,
    infer=infer_fused_conv,
    inputs=(2, 3),
    family="Conv",
    with_activation="FusedConv",
    per_sample=each_image,
    weight=conv_weight,
    macs=conv_macs(),
)
def fused_conv(
    attrs: FusedConvAttrs, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
) -> np.ndarray:
    return attrs.apply(conv(attrs, x, w, b))


@register_op(
    "FusedGemm",
    attrs=FusedGemmAttrs,
    infer=infer_fused_gemm,
    inputs=(2, 3),
    family="Gemm",
    with_activation="FusedGemm",
    per_sample=gemm_per_sample,
    weight=gemm_weight,
    macs=gemm_macs(),
)
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
    z = input_type(types, 3, "the residual input (input 3)")
    check(z.dtype == out.dtype, f"residual {z} does not have the convolution's dtype {out.dtype}")
    if z.shape is not None and out.shape is not None:
        check(
            residual_fits(z.shape, out.shape),
            f"residual {z} does not broadcast to the convolution's output {out}",
        )
    return [out]


def residual_per_sample(step: StepShapes) -> bool:
    """Filters, and a residual sliced like every image tensor (not a constant)."""
    return step.constants[3] is None


@register_op(
    "FusedConvAdd",
    attrs=FusedConvAttrs,
    infer=infer_fused_conv_add,
    inputs=4,
    per_sample=residual_per_sample,
    weight=conv_weight,
    macs=conv_macs(),
)
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
