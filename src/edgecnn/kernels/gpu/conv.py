"""Convolution on a GPU, device-agnostic: the geometry (1-D convolutions as 2-D with height 1), the
rules that choose im2col + GEMM or the direct kernel, and what both factories prepare at plan time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.gpu.activations import ActivationParams, applies_activation, node_activation
from edgecnn.kernels.gpu.step import Types, Values, is_float32, shape_of
from edgecnn.ops.conv import conv_geometry
from edgecnn.ops.fused import residual_conv_node
from edgecnn.ops.registry import get_op

COLUMN_BUDGET = 256 * 2**20
"""Bytes of im2col columns per launch; a larger batch is processed a chunk of images at a time."""

DIRECT_TAPS = 16
"""Grouped convolutions with fewer taps per output (Cg * KH * KW) run the direct kernel."""


@dataclass(frozen=True)
class Conv2d:
    """A convolution's sizes, 1-D ones seen as 2-D with height 1."""

    n: int
    c: int
    h: int
    w: int
    m: int
    groups: int
    kh: int
    kw: int
    sh: int
    sw: int
    ph: int
    pw: int
    dh: int
    dw: int
    oh: int
    ow: int

    @property
    def channels_per_group(self) -> int:
        return self.c // self.groups

    @property
    def taps(self) -> int:
        """Rows of the column matrix: Cg * KH * KW."""
        return self.channels_per_group * self.kh * self.kw

    @property
    def positions(self) -> int:
        return self.oh * self.ow

    def args(self) -> tuple[np.int32, ...]:
        """CONV_GEOMETRY of the device source (conv.cl, cuda/source.py)."""
        values = (self.c, self.h, self.w, self.groups, self.kh, self.kw, self.sh, self.sw)
        return tuple(np.int32(v) for v in (*values, self.ph, self.pw, self.dh, self.dw, self.oh, self.ow))

    @property
    def is_pointwise(self) -> bool:
        """1x1, unit stride, no padding: the input planes are already the column matrix."""
        return (self.kh, self.kw, self.sh, self.sw, self.ph, self.pw) == (1, 1, 1, 1, 0, 0) and (
            self.oh,
            self.ow,
        ) == (self.h, self.w)

    def column_chunk(self, per_image: int) -> int:
        """Images per im2col launch within COLUMN_BUDGET (at least one), ``per_image`` bytes each."""
        return max(1, min(self.n, COLUMN_BUDGET // max(per_image, 1)))


def conv2d_of(node: Node, types: Types) -> Conv2d:
    x, w = shape_of(types[0]), shape_of(types[1])
    geo = conv_geometry(node.attrs, x, w)
    assert geo.pads is not None
    rank = len(geo.kernel)
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]
    if rank == 1:  # (N, C, W) as (N, C, 1, W)
        x, w = (*x[:2], 1, x[2]), (*w[:2], 1, w[2])
        kernel, strides, dilations = (1, *geo.kernel), (1, *geo.strides), (1, *geo.dilations)
        pads = (0, geo.pads[0], 0, geo.pads[1])
    else:
        kernel, strides, dilations, pads = geo.kernel, geo.strides, geo.dilations, geo.pads
    oh = (x[2] + pads[0] + pads[2] - (kernel[0] - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (x[3] + pads[1] + pads[3] - (kernel[1] - 1) * dilations[1] - 1) // strides[1] + 1
    return Conv2d(
        n=x[0], c=x[1], h=x[2], w=x[3], m=w[0], groups=node.attrs.group, kh=kernel[0], kw=kernel[1],
        sh=strides[0], sw=strides[1], ph=pads[0], pw=pads[1], dh=dilations[0], dw=dilations[1], oh=oh, ow=ow,
    )  # fmt: skip


def conv_supported(node: Node, types: Types, values: Values) -> bool:
    """Float32 input, weights and bias of 32-bit addressable size, and an activation the device
    source applies."""
    if not applies_activation(node):
        return False
    x, w = types[0], types[1] if len(types) > 1 else None
    if not (is_float32(x, (3, 4)) and is_float32(w, x.rank)):
        return False
    b = types[2] if len(types) > 2 else None
    return b is None or is_float32(b, 1)


def prefers_direct(node: Node, types: Types, values: Values) -> bool:
    """Depthwise and narrow grouped convolutions: each output reads few inputs, so a column matrix
    would be mostly copies and the GEMM tiny."""
    return (
        conv_supported(node, types, values)
        and conv2d_of(node, types).taps < DIRECT_TAPS
        and node.attrs.group > 1
    )


def prefers_gemm(node: Node, types: Types, values: Values) -> bool:
    return conv_supported(node, types, values) and not prefers_direct(node, types, values)


def output_shape(node: Node, types: Types, values: Values) -> tuple[int, ...]:
    (out,) = get_op(node.op).infer(node.attrs, types, values)
    return shape_of(out)


def residual_supported(node: Node, types: Types, values: Values) -> bool:
    """FusedConvAdd: the convolution runs here and the residual is a float32 tensor of exactly its
    output's shape."""
    if len(types) != 4 or not conv_supported(node, types[:3], values[:3]) or not is_float32(types[3]):
        return False
    return shape_of(types[3]) == output_shape(node, types, values)


DeviceT = TypeVar("DeviceT")
ArrayT = TypeVar("ArrayT")


@dataclass(frozen=True)
class ConvSetup(Generic[DeviceT, ArrayT]):
    """What both conv factories prepare: device, geometry, constants uploaded once, activation."""

    device: DeviceT
    geo: Conv2d
    weights: ArrayT | None  # None: weights are a run-time input
    bias: ArrayT | None  # None: no bias, or a run-time one
    activation: ActivationParams
    out_shape: tuple[int, ...]


def conv_setup(
    node: Node,
    types: Types,
    values: Values,
    device: DeviceT,
    constant: Callable[[DeviceT, Values, int], ArrayT | None],
) -> ConvSetup[DeviceT, ArrayT]:
    """The plan-time part of a Conv/FusedConv step on ``device``; ``constant`` uploads an input
    that is a plan-time constant (the backend's ``constant_on_device``)."""
    has_bias = len(node.inputs) > 2 and bool(node.inputs[2])
    return ConvSetup(
        device=device,
        geo=conv2d_of(node, types),
        weights=constant(device, values, 1),
        bias=constant(device, values, 2) if has_bias else None,
        activation=node_activation(node),
        out_shape=output_shape(node, types, values),
    )


StepT = TypeVar("StepT")
Factory = Callable[[Node, Types, Values], StepT]


def register_conv_kernels(
    kernel: Callable[..., Callable[[Any], Any]],
    backend: str,
    gemm: Factory[Any],
    direct: Factory[Any],
    residual: Factory[Any],
) -> None:
    """A GPU backend's convolutions in selection order: Conv and FusedConv through im2col + GEMM
    where :func:`prefers_gemm` (priority 10), else the direct kernel (5); FusedConvAdd through
    ``residual`` (see :func:`residual_inner_step`). ``kernel`` is the backend's ``register_kernel``."""
    for op, tag in (("Conv", "conv"), ("FusedConv", "fused_conv")):
        kernel(op, when=prefers_gemm, priority=10, name=f"{backend}_{tag}_im2col_gemm")(gemm)
        kernel(op, when=conv_supported, priority=5, name=f"{backend}_{tag}_direct")(direct)
    kernel("FusedConvAdd", when=residual_supported, priority=10, name=f"{backend}_conv_residual")(residual)


def residual_inner_step(
    node: Node, types: Types, values: Values, gemm: Factory[StepT], direct: Factory[StepT]
) -> tuple[StepT, int]:
    """(the step of a FusedConvAdd's convolution without activation, chosen as for a Conv; how many
    of the node's inputs it takes). The backend then adds the residual and applies the activation."""
    inner = residual_conv_node(node)
    count = len(inner.inputs)
    inner_types, inner_values = types[:count], values[:count]
    factory = gemm if prefers_gemm(inner, inner_types, inner_values) else direct
    return factory(inner, inner_types, inner_values), count
