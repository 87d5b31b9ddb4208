"""Conv and FusedConv on OpenCL (1-D and 2-D): im2col + GEMM (seed 001's layer), a 1x1 shortcut
that multiplies the input directly, and a direct kernel for depthwise and narrow grouped convolutions.
FusedConvAdd (a residual block's tail) runs the same convolution, then the residual is added and the
activation applied in place by the elementwise kernels (two more launches, no extra buffer)."""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.gpu.activations import activation_params
from edgecnn.kernels.gpu.conv import (
    ConvSetup,
    conv_setup,
    register_conv_kernels,
    residual_inner_step,
)
from edgecnn.kernels.gpu.step import Types, Values, either, shape_of, variable_inputs
from edgecnn.kernels.opencl.array import DeviceArray
from edgecnn.kernels.opencl.eltwise import BINARY_CODES, broadcast_plan
from edgecnn.kernels.opencl.gemm import (
    BLOCK_COLS,
    NO_WRAP,
    Epilogue,
    Operand,
    choose_variant,
    enqueue_gemm,
    padded_columns,
)
from edgecnn.kernels.opencl.runtime import ACTIVATION_KERNELS, OpenCLDevice
from edgecnn.kernels.opencl.step import (
    BACKEND,
    OpenCLStep,
    constant_on_device,
    device_for_plan,
    opencl_kernel,
)


def opencl_conv_setup(node: Node, types: Types, values: Values) -> ConvSetup[OpenCLDevice, DeviceArray]:
    return conv_setup(node, types, values, device_for_plan(), constant_on_device)


def _gemm_conv_factory(node: Node, types: Types, values: Values) -> OpenCLStep:
    setup = opencl_conv_setup(node, types, values)
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
    chunk = geo.column_chunk(per_image)
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
    setup = opencl_conv_setup(node, types, values)
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


def _residual_conv_factory(node: Node, types: Types, values: Values) -> OpenCLStep:
    """The convolution's step (no activation), then y += z and y = act(y) in place."""
    conv_step, count = residual_inner_step(node, types, values, _gemm_conv_factory, _direct_conv_factory)
    device = conv_step.device
    shape = shape_of(types[3])
    dims, a_strides, b_strides = broadcast_plan(shape, shape)
    meta = DeviceArray.upload(device, np.array(dims + a_strides + b_strides, np.int32).view(np.float32))
    add, rank, total = np.int32(BINARY_CODES["Add"]), np.int32(len(dims)), int(np.prod(shape))
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


register_conv_kernels(
    opencl_kernel, BACKEND, _gemm_conv_factory, _direct_conv_factory, _residual_conv_factory
)
