"""Conv and FusedConv on CUDA (1-D and 2-D): im2col (a CUDA kernel) + batched cuBLAS GEMM through
cupy.matmul, the input planes multiplied directly for 1x1 convolutions, and a direct kernel for
depthwise and narrow grouped ones. Bias and activation follow in one epilogue launch. FusedConvAdd
runs the same convolution without activation, then adds the residual (CuPy, in place) and applies the
activation in place (the activation kernel). Geometry and the choice of kernel in kernels.gpu.conv."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.cuda.array import CudaArray
from edgecnn.kernels.cuda.blas import ONE
from edgecnn.kernels.cuda.runtime import CudaDevice
from edgecnn.kernels.cuda.step import BACKEND, CudaStep, constant_on_device, cuda_kernel, device_for_plan
from edgecnn.kernels.gpu.activations import ActivationParams, activation_params
from edgecnn.kernels.gpu.conv import (
    ConvSetup,
    conv_setup,
    register_conv_kernels,
    residual_inner_step,
)
from edgecnn.kernels.gpu.step import Types, Values, either, shape_of, variable_inputs


def cuda_conv_setup(node: Node, types: Types, values: Values) -> ConvSetup[CudaDevice, CudaArray]:
    return conv_setup(node, types, values, device_for_plan(), constant_on_device)


def epilogue(
    device: CudaDevice, out_shape: tuple[int, ...], activation: ActivationParams, rows: int
) -> Callable[[Any, CudaArray | None], None]:
    """``apply(y, bias)``: y = act(y + bias[channel]) in place, y seen as (N, rows, plane); nothing
    to do without a bias or an activation. Launch arguments are fixed at plan time."""
    total = int(np.prod(out_shape))
    plane = max(total // max(out_shape[0] * rows, 1), 1)
    fixed = (np.int32(rows), np.int32(plane), *activation)
    has_activation = int(activation[0]) != 0

    def apply(y: Any, bias: CudaArray | None) -> None:
        if bias is None and not has_activation:
            return
        source = bias.array if bias is not None else y  # unread when has_bias is 0
        device.launch("bias_activation", total, y, source, np.int32(bias is not None), *fixed)

    return apply


def _gemm_conv_factory(node: Node, types: Types, values: Values) -> CudaStep:
    setup = cuda_conv_setup(node, types, values)
    device, geo, out_shape = setup.device, setup.geo, setup.out_shape
    cupy = device.cupy
    g, mg, kc, p = geo.groups, geo.m // geo.groups, geo.taps, geo.positions
    chunk = geo.column_chunk(g * kc * p * 4)
    # One group: cuBLAS directly, the weights shared by every image. Groups: cupy.matmul with the
    # fewest batch axes, the weights broadcast over images.
    lead = () if geo.n == 1 and g == 1 else (geo.n,) if g == 1 else (geo.n, g)
    weight_shape = (mg, kc) if g == 1 else (g, mg, kc)
    im2col_args = (*geo.args(), np.int32(0))
    finish = epilogue(device, out_shape, setup.activation, geo.m)
    empty = int(np.prod(out_shape)) == 0

    def launch(x: CudaArray, w: CudaArray, b: CudaArray | None = None) -> CudaArray:
        w, b = either(setup.weights, w), either(setup.bias, b)
        if empty:
            return CudaArray.empty(device, out_shape)
        if g == 1 and chunk >= geo.n:  # Y[n] = W @ cols[n], one (strided batched) cuBLAS call
            if geo.is_pointwise:
                cols = x.array
            else:
                cols = device.empty((geo.n, kc, p))
                device.launch("im2col", cols.size, x.array, *im2col_args, cols)
            y = device.empty(out_shape)
            device.blas.gemm(mg, p, kc, w.array.data.ptr, cols.data.ptr, y.data.ptr, ONE, geo.n, 0, kc * p)
            finish(y, b)
            return CudaArray(device, y)
        weights = w.array.reshape(weight_shape)  # per group an (Mg x Kc) matrix
        if geo.is_pointwise:  # the input (N, G, Cg, H*W) is the column matrix
            y = cupy.matmul(weights, x.array.reshape(*lead, kc, p))
        elif chunk >= geo.n:
            cols = device.empty((*lead, kc, p))
            device.launch("im2col", cols.size, x.array, *im2col_args, cols)
            y = cupy.matmul(weights, cols)
        else:  # a chunk of images at a time, each product written into its part of the output
            y = device.empty((geo.n, g, mg, p))
            cols = device.empty((chunk, g, kc, p))
            for n0 in range(0, geo.n, chunk):
                images = min(chunk, geo.n - n0)
                device.launch("im2col", images * g * kc * p, x.array, *geo.args(), np.int32(n0), cols)
                cupy.matmul(weights.reshape(g, mg, kc), cols[:images], out=y[n0 : n0 + images])
        finish(y, b)
        return CudaArray(device, y.reshape(out_shape))

    return CudaStep(device, launch, variable_inputs(node, values, (0, 1, 2)))


def _direct_conv_factory(node: Node, types: Types, values: Values) -> CudaStep:
    setup = cuda_conv_setup(node, types, values)
    device, geo, out_shape, activation = setup.device, setup.geo, setup.out_shape, setup.activation
    geometry = (*geo.args(),)
    m = np.int32(geo.m)

    def launch(x: CudaArray, w: CudaArray, b: CudaArray | None = None) -> CudaArray:
        w, b = either(setup.weights, w), either(setup.bias, b)
        y = CudaArray.empty(device, out_shape)
        bias = b.array if b is not None else w.array  # unread when has_bias is 0
        device.launch("conv_direct", y.size, x.array, *geometry, w.array, m, bias, np.int32(b is not None),
                      y.array, *activation)  # fmt: skip
        return y

    return CudaStep(device, launch, variable_inputs(node, values, (0, 1, 2)))


def _residual_conv_factory(node: Node, types: Types, values: Values) -> CudaStep:
    """The convolution's step (no activation), then y += z and y = act(y) in place."""
    conv_step, count = residual_inner_step(node, types, values, _gemm_conv_factory, _direct_conv_factory)
    device = conv_step.device
    total = int(np.prod(shape_of(types[3])))
    activation = activation_params(node.attrs)
    has_activation = int(activation[0]) != 0
    residual = constant_on_device(device, values, 3)

    def launch(x: CudaArray, w: CudaArray, b: CudaArray | None, z: CudaArray) -> CudaArray:
        y = conv_step.launch(x, w, b) if count == 3 else conv_step.launch(x, w)
        assert isinstance(y, CudaArray)
        z = either(residual, z)
        device.cupy.add(y.array, z.array.reshape(y.array.shape), out=y.array)
        if has_activation:
            device.launch("activation", total, y.array, y.array, *activation)
        return y

    return CudaStep(device, launch, variable_inputs(node, values, (0, 1, 2, 3)))


register_conv_kernels(cuda_kernel, BACKEND, _gemm_conv_factory, _direct_conv_factory, _residual_conv_factory)
