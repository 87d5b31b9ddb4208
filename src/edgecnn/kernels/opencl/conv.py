"""Conv and FusedConv on OpenCL (1-D and 2-D): im2col + GEMM (seed 001's layer), a 1x1 shortcut
that multiplies the input directly, and a direct kernel for depthwise and narrow grouped convolutions.
FusedConvAdd (a residual block's tail) runs the same convolution, then the residual is added and the
activation applied in place by the elementwise kernels (two more launches, no extra buffer)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.opencl.array import DeviceArray
from edgecnn.kernels.opencl.eltwise import OPS as BINARY_OPS
from edgecnn.kernels.opencl.eltwise import broadcast_plan
from edgecnn.kernels.opencl.gemm import (
    BLOCK_COLS,
    NO_WRAP,
    Epilogue,
    Operand,
    choose_variant,
    enqueue_gemm,
    padded_columns,
)
from edgecnn.kernels.opencl.runtime import OpenCLDevice
from edgecnn.kernels.opencl.step import (
    NO_ACTIVATION,
    OpenCLStep,
    activation_params,
    constant_on_device,
    device_for_plan,
    either,
    is_float32,
    opencl_kernel,
    shape_of,
    variable_inputs,
)
from edgecnn.ops.conv import conv_geometry
from edgecnn.ops.fused import residual_conv_node
from edgecnn.ops.registry import get_op

Types = Sequence["TensorType | None"]
Values = Sequence["np.ndarray | None"]

COLUMN_BUDGET = 256 * 2**20
"""Bytes of im2col columns per launch; a larger batch is processed a chunk of images at a time."""


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
        """CONV_GEOMETRY of conv.cl."""
        values = (self.c, self.h, self.w, self.groups, self.kh, self.kw, self.sh, self.sw)
        return tuple(np.int32(v) for v in (*values, self.ph, self.pw, self.dh, self.dw, self.oh, self.ow))

    @property
    def is_pointwise(self) -> bool:
        """1x1, unit stride, no padding: the input planes are already the column matrix."""
        return (self.kh, self.kw, self.sh, self.sw, self.ph, self.pw) == (1, 1, 1, 1, 0, 0) and (
            self.oh,
            self.ow,
        ) == (self.h, self.w)


def conv2d_of(node: Node, types: Types) -> Conv2d:
    x, w = shape_of(types[0]), shape_of(types[1])
    geo = conv_geometry(node.attrs, x, w)
    assert geo.pads is not None
    rank = len(geo.kernel)
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
    x, w = types[0], types[1] if len(types) > 1 else None
    if not (is_float32(x, (3, 4)) and is_float32(w, x.rank)):  # type: ignore[union-attr]
        return False
    b = types[2] if len(types) > 2 else None
    return b is None or is_float32(b, 1)


def prefers_direct(node: Node, types: Types, values: Values) -> bool:
    """Depthwise and narrow grouped convolutions: each output reads few inputs, so a column matrix
    would be mostly copies and the GEMM tiny."""
    return conv_supported(node, types, values) and conv2d_of(node, types).taps < 16 and node.attrs.group > 1


def prefers_gemm(node: Node, types: Types, values: Values) -> bool:
    return conv_supported(node, types, values) and not prefers_direct(node, types, values)


def output_shape(node: Node, types: Types, values: Values) -> tuple[int, ...]:
    (out,) = get_op(node.op).infer(node.attrs, types, values)
    return shape_of(out)


@dataclass(frozen=True)
class ConvSetup:
    """What both conv factories prepare: device, geometry, constants uploaded once, activation."""

    device: OpenCLDevice
    geo: Conv2d
    weights: DeviceArray | None  # None: weights are a run-time input
    bias: DeviceArray | None  # None: no bias, or a run-time one
    activation: tuple[np.int32, np.float32, np.float32, np.float32]
    out_shape: tuple[int, ...]


def conv_setup(node: Node, types: Types, values: Values) -> ConvSetup:
    device = device_for_plan()
    has_bias = len(node.inputs) > 2 and bool(node.inputs[2])
    return ConvSetup(
        device=device,
        geo=conv2d_of(node, types),
        weights=constant_on_device(device, values, 1),
        bias=constant_on_device(device, values, 2) if has_bias else None,
        activation=activation_params(node.attrs) if node.op == "FusedConv" else NO_ACTIVATION,
        out_shape=output_shape(node, types, values),
    )


def _gemm_conv_factory(node: Node, types: Types, values: Values) -> OpenCLStep:
    setup = conv_setup(node, types, values)
    device, geo, out_shape = setup.device, setup.geo, setup.out_shape
    g, mg, kc, p = geo.groups, geo.m // geo.groups, geo.taps, geo.positions
    # im2col writes rows padded for float8 loads; a 1x1 conv reads the input planes, whole float8s
    # only when the plane size is a multiple of 8.
    variant = choose_variant(mg, p, kc, not geo.is_pointwise or p % BLOCK_COLS == 0, device.is_cpu)
    weights = Operand(kc, 1, g, mg * kc)  # per group an (Mg x Kc) row-major block
    bias_layout = Operand(1, 0, g, mg)  # bias[g * Mg + i] for row i of group g
    epilogue = Epilogue(1.0, 1.0, setup.activation)
    # Transposed columns (contiguous along k) suit the float4 kernel; K x P rows suit the others.
    row = padded_columns(p) if variant == "blocked" else p
    k_stride, p_stride = (1, kc) if variant == "vec4" else (row, 1)
    per_image = g * kc * row * 4
    chunk = max(1, min(geo.n, COLUMN_BUDGET // max(per_image, 1)))
    columns = Operand(k_stride, p_stride, NO_WRAP, kc * row)  # element (k, p) at k * k_stride + p * p_stride
    by_rows = device.is_cpu and p_stride == 1  # im2col_rows writes whole contiguous output rows

    def launch(x: DeviceArray, w: DeviceArray, b: DeviceArray | None = None) -> DeviceArray:
        w, b = either(setup.weights, w), either(setup.bias, b)
        y = DeviceArray.empty(device, out_shape)
        bias = b.buffer if b is not None else None
        if geo.is_pointwise:  # the input (N*G, Cg, H*W) is the column matrix
            plane = Operand(p, 1, NO_WRAP, geo.channels_per_group * p)
            enqueue_gemm(device, variant, mg, p, kc, geo.n * g, w.buffer, weights, x.buffer, plane,
                         y.buffer, 0, bias, bias_layout, epilogue)  # fmt: skip
            return y
        cols = device.allocate(chunk * per_image)
        for n0 in range(0, geo.n, chunk):
            images = min(chunk, geo.n - n0)
            if by_rows:
                device.launch_1d("im2col_rows", images * g * kc * geo.oh, x.buffer, *geo.args(), np.int32(n0),
                                 cols, np.int32(k_stride), np.int32(kc * row))  # fmt: skip
            else:
                device.launch_1d("im2col", images * g * kc * p, x.buffer, *geo.args(), np.int32(n0), cols,
                                 np.int32(k_stride), np.int32(p_stride), np.int32(kc * row))  # fmt: skip
            enqueue_gemm(device, variant, mg, p, kc, images * g, w.buffer, weights, cols, columns,
                         y.buffer, n0 * geo.m * p, bias, bias_layout, epilogue)  # fmt: skip
        return y

    return OpenCLStep(device, launch, variable_inputs(node, values, (0, 1, 2)))


def _direct_conv_factory(node: Node, types: Types, values: Values) -> OpenCLStep:
    setup = conv_setup(node, types, values)
    device, geo, out_shape, activation = setup.device, setup.geo, setup.out_shape, setup.activation
    total = geo.n * geo.m * geo.positions

    def launch(x: DeviceArray, w: DeviceArray, b: DeviceArray | None = None) -> DeviceArray:
        w, b = either(setup.weights, w), either(setup.bias, b)
        y = DeviceArray.empty(device, out_shape)
        bias = b.buffer if b is not None else w.buffer  # unread when has_bias is 0
        device.launch_1d("conv_direct", total, x.buffer, *geo.args(), w.buffer, np.int32(geo.m), bias,
                         np.int32(b is not None), y.buffer, *activation)  # fmt: skip
        return y

    return OpenCLStep(device, launch, variable_inputs(node, values, (0, 1, 2)))


@opencl_kernel("Conv", when=prefers_gemm, priority=10, name="opencl_conv_im2col_gemm")
def opencl_conv_gemm(node: Node, types: Types, values: Values) -> OpenCLStep:
    return _gemm_conv_factory(node, types, values)


@opencl_kernel("Conv", when=conv_supported, priority=5, name="opencl_conv_direct")
def opencl_conv_direct(node: Node, types: Types, values: Values) -> OpenCLStep:
    return _direct_conv_factory(node, types, values)


@opencl_kernel("FusedConv", when=prefers_gemm, priority=10, name="opencl_fused_conv_im2col_gemm")
def opencl_fused_conv_gemm(node: Node, types: Types, values: Values) -> OpenCLStep:
    return _gemm_conv_factory(node, types, values)


@opencl_kernel("FusedConv", when=conv_supported, priority=5, name="opencl_fused_conv_direct")
def opencl_fused_conv_direct(node: Node, types: Types, values: Values) -> OpenCLStep:
    return _direct_conv_factory(node, types, values)


ACTIVATION_KERNELS = {
    1: "act_relu",
    2: "act_leaky_relu",
    3: "act_clip",
    4: "act_sigmoid",
    5: "act_hard_swish",
    6: "act_silu",
}
"""common.cl's activation kernel per code of ACTIVATION_CODES (0, none, launches nothing)."""


def residual_supported(node: Node, types: Types, values: Values) -> bool:
    """The convolution runs here and the residual is a float32 tensor of exactly its output's shape."""
    if len(types) != 4 or not conv_supported(node, types[:3], values[:3]) or not is_float32(types[3]):
        return False
    return shape_of(types[3]) == output_shape(node, types, values)


@opencl_kernel("FusedConvAdd", when=residual_supported, priority=10, name="opencl_conv_residual")
def opencl_conv_residual(node: Node, types: Types, values: Values) -> OpenCLStep:
    """The convolution's step (no activation), then y += z and y = act(y) in place."""
    inner = residual_conv_node(node)
    count = len(inner.inputs)
    inner_types, inner_values = types[:count], values[:count]
    factory = _gemm_conv_factory if prefers_gemm(inner, inner_types, inner_values) else _direct_conv_factory
    conv_step = factory(inner, inner_types, inner_values)
    device = conv_step.device
    shape = shape_of(types[3])
    dims, a_strides, b_strides = broadcast_plan(shape, shape)
    meta = DeviceArray.upload(device, np.array(dims + a_strides + b_strides, np.int32).view(np.float32))
    add, rank, total = np.int32(BINARY_OPS["Add"]), np.int32(len(dims)), int(np.prod(shape))
    code, slope, low, high = activation_params(node.attrs)
    activation = ACTIVATION_KERNELS.get(int(code))
    residual = constant_on_device(device, values, 3)

    def launch(x: DeviceArray, w: DeviceArray, b: DeviceArray | None, z: DeviceArray) -> DeviceArray:
        y = conv_step.launch(x, w, b) if count == 3 else conv_step.launch(x, w)
        assert isinstance(y, DeviceArray)
        z = either(residual, z)
        device.launch_1d("binary", total, y.buffer, z.buffer, y.buffer, add, meta.buffer, rank)
        if activation is not None:
            device.launch_1d(activation, total, y.buffer, y.buffer, slope, low, high)
        return y

    return OpenCLStep(device, launch, variable_inputs(node, values, (0, 1, 2, 3)))
