"""Gemm, FusedGemm and MatMul on CUDA: cuBLAS through cupy.matmul (constant weights stored once in
the orientation the product reads), then alpha, beta * C and the activation on the GPU."""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.cuda.array import CudaArray
from edgecnn.kernels.cuda.runtime import CudaDevice
from edgecnn.kernels.cuda.step import CudaStep, constant_on_device, cuda_kernel, device_for_plan
from edgecnn.kernels.gpu.activations import ActivationParams, node_activation
from edgecnn.kernels.gpu.dense import gemm_sizes, gemm_supported
from edgecnn.kernels.gpu.step import Types, Values, either, is_float32, shape_of, variable_inputs
from edgecnn.ops.registry import get_op


def apply_activation(device: CudaDevice, y: CudaArray, activation: ActivationParams) -> None:
    """y = act(y) in place (nothing for "none")."""
    if int(activation[0]) != 0:
        device.launch("activation", y.size, y.array, y.array, *activation)


def _upload_oriented(device: CudaDevice, value: np.ndarray | None, transposed: bool) -> CudaArray | None:
    """A constant operand uploaded once, already transposed where the node transposes it."""
    if value is None:
        return None
    return CudaArray.upload(device, np.ascontiguousarray(value.T if transposed else value))


def column_bias(value: np.ndarray | None, n: int, beta: float) -> np.ndarray | None:
    """beta * C as one value per output column when the constant C is a row, (n,) or (1, n): the
    fused epilogue then adds it with the activation in one launch. None for other shapes."""
    if value is None or value.shape not in ((n,), (1, n)):
        return None
    return (np.float32(beta) * np.asarray(value, np.float32)).reshape(n)


def _gemm_factory(node: Node, types: Types, values: Values) -> CudaStep:
    attrs = node.attrs
    device = device_for_plan()
    cupy = device.cupy
    m, k, n = gemm_sizes(node, types)
    a_const = _upload_oriented(device, values[0], attrs.trans_a)
    b_const = _upload_oriented(device, values[1], attrs.trans_b)
    has_c = len(node.inputs) > 2 and bool(node.inputs[2])
    bias = column_bias(values[2], n, attrs.beta) if has_c and attrs.beta != 0 else None
    bias_const = None if bias is None else CudaArray.upload(device, bias)
    c_const = constant_on_device(device, values, 2) if has_c and bias is None else None
    activation = node_activation(node)
    alpha, beta = np.float32(attrs.alpha), np.float32(attrs.beta)
    alpha_host = np.array([alpha], np.float32)
    epilogue = (np.int32(1), np.int32(n), np.int32(1), *activation)  # has_bias, rows = n, plane = 1

    def launch(a: CudaArray, b: CudaArray, c: CudaArray | None = None) -> CudaArray:
        left = a_const.array if a_const is not None else (a.array.T if attrs.trans_a else a.array)
        right = b_const.array if b_const is not None else (b.array.T if attrs.trans_b else b.array)
        if m * n * k and left.flags.c_contiguous and right.flags.c_contiguous:  # cuBLAS directly
            y = device.empty((m, n))
            device.blas.gemm(m, n, k, left.data.ptr, right.data.ptr, y.data.ptr, alpha_host)
        else:
            y = cupy.ascontiguousarray(cupy.matmul(left, right), dtype=cupy.float32)
            if alpha != 1:
                y *= alpha
        result = CudaArray(device, y)
        if bias_const is not None:  # y = act(y + bias[column]) in one launch
            device.launch("bias_activation", m * n, y, bias_const.array, *epilogue)
            return result
        c = either(c_const, c)
        if c is not None and beta != 0:
            y += c.array if beta == 1 else beta * c.array
        apply_activation(device, result, activation)
        return result

    return CudaStep(device, launch, variable_inputs(node, values, (0, 1, 2)))


@cuda_kernel("Gemm", when=gemm_supported, name="cuda_gemm")
def cuda_gemm(node: Node, types: Types, values: Values) -> CudaStep:
    return _gemm_factory(node, types, values)


@cuda_kernel("FusedGemm", when=gemm_supported, name="cuda_fused_gemm")
def cuda_fused_gemm(node: Node, types: Types, values: Values) -> CudaStep:
    return _gemm_factory(node, types, values)


def matmul_supported(node: Node, types: Types, values: Values) -> bool:
    """Any float32 MatMul whose output shape is known: cupy.matmul broadcasts as numpy does."""
    if not (is_float32(types[0]) and is_float32(types[1])):
        return False
    try:
        (out,) = get_op("MatMul").infer(node.attrs, types, values)
    except Exception:  # incompatible shapes: the reference kernel reports them
        return False
    return is_float32(out)


@cuda_kernel("MatMul", when=matmul_supported, name="cuda_matmul")
def cuda_matmul(node: Node, types: Types, values: Values) -> CudaStep:
    device = device_for_plan()
    cupy = device.cupy
    (out_type,) = get_op("MatMul").infer(node.attrs, types, values)
    out_shape = shape_of(out_type)
    consts = constant_on_device(device, values, 0), constant_on_device(device, values, 1)

    def launch(a: CudaArray, b: CudaArray) -> CudaArray:
        a, b = either(consts[0], a), either(consts[1], b)
        y = cupy.matmul(a.array, b.array)
        return CudaArray(device, cupy.ascontiguousarray(y, dtype=cupy.float32).reshape(out_shape))

    return CudaStep(device, launch, variable_inputs(node, values, (0, 1)))
