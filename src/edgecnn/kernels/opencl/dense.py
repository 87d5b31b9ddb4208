"""Gemm, FusedGemm and MatMul on OpenCL: constant weights packed once into the layout the chosen
GEMM variant reads fastest, then one batched GEMM launch per run."""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.gpu.activations import node_activation
from edgecnn.kernels.gpu.dense import gemm_sizes, gemm_supported
from edgecnn.kernels.gpu.step import Types, Values, either, is_float32, shape_of, variable_inputs
from edgecnn.kernels.opencl.array import DeviceArray
from edgecnn.kernels.opencl.gemm import Epilogue, Operand, choose_variant, enqueue_gemm, padded_columns
from edgecnn.kernels.opencl.runtime import OpenCLDevice
from edgecnn.kernels.opencl.step import OpenCLStep, constant_on_device, device_for_plan, opencl_kernel
from edgecnn.ops.common import broadcast_shapes
from edgecnn.ops.registry import get_op


def broadcast_operand(shape: tuple[int, ...], rows: int, cols: int) -> Operand:
    """Strides that read a tensor unidirectionally broadcast to (rows, cols) (zero along size-1 axes)."""
    r, c = (1, 1, *shape)[-2:]
    return Operand(c if r > 1 and rows > 1 else 0, 1 if c > 1 and cols > 1 else 0)


def packed_weights(
    device: OpenCLDevice, value: np.ndarray, transposed: bool, variant: str
) -> tuple[DeviceArray, Operand]:
    """B (K x N, stored transposed if ``transposed``) packed once into the layout the variant reads
    fastest: (N, K) rows for the float4 kernel, which reads along k; (K, N) rows for the others,
    whose neighbouring work items read along n, zero-padded to whole float8s for the blocked kernel."""
    b = value.T if transposed else value
    k, n = b.shape
    if variant == "vec4":
        return DeviceArray.upload(device, np.ascontiguousarray(b.T)), Operand.col_major(k, n)
    if variant == "blocked":
        padded = np.zeros((k, padded_columns(n)), np.float32)
        padded[:, :n] = b
        return DeviceArray.upload(device, padded), Operand(padded.shape[1], 1)
    return DeviceArray.upload(device, np.ascontiguousarray(b)), Operand.row_major(k, n)


def _gemm_factory(node: Node, types: Types, values: Values) -> OpenCLStep:
    attrs = node.attrs
    device = device_for_plan()
    m, k, n = gemm_sizes(node, types)
    variant = choose_variant(m, n, k, values[1] is not None and not attrs.trans_a, device.is_cpu)
    a_layout = Operand.col_major(m, k) if attrs.trans_a else Operand.row_major(m, k)
    a_const = constant_on_device(device, values, 0)
    if values[1] is not None:
        b_const, b_layout = packed_weights(device, values[1], attrs.trans_b, variant)
    else:
        b_const, b_layout = None, Operand.col_major(k, n) if attrs.trans_b else Operand.row_major(k, n)
    has_c = len(node.inputs) > 2 and bool(node.inputs[2])
    c_const = constant_on_device(device, values, 2) if has_c else None
    c_layout = broadcast_operand(shape_of(types[2]), m, n) if has_c else None
    activation = node_activation(node)
    epilogue = Epilogue(attrs.alpha, attrs.beta, activation)

    def launch(a: DeviceArray, b: DeviceArray, c: DeviceArray | None = None) -> DeviceArray:
        a, b, c = either(a_const, a), either(b_const, b), either(c_const, c)
        y = DeviceArray.empty(device, (m, n))
        enqueue_gemm(
            device, variant, m, n, k, 1, a.buffer, a_layout, b.buffer, b_layout, y.buffer, 0,
            c.buffer if c is not None else None, c_layout, epilogue,
        )  # fmt: skip
        return y

    return OpenCLStep(device, launch, variable_inputs(node, values, (0, 1, 2)))


@opencl_kernel("Gemm", when=gemm_supported, name="opencl_gemm")
def opencl_gemm(node: Node, types: Types, values: Values) -> OpenCLStep:
    return _gemm_factory(node, types, values)


@opencl_kernel("FusedGemm", when=gemm_supported, name="opencl_fused_gemm")
def opencl_fused_gemm(node: Node, types: Types, values: Values) -> OpenCLStep:
    return _gemm_factory(node, types, values)


def _matmul_batches(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(batches, a batched?, b batched?) when the batch axes are equal or one side has none
    (a single broadcast matrix); None for mixed broadcasting, left to the reference kernel."""
    batch_a, batch_b = a[:-2], b[:-2]
    count_a, count_b = int(np.prod(batch_a, dtype=np.int64)), int(np.prod(batch_b, dtype=np.int64))
    if count_a == 1 or count_b == 1:
        return max(count_a, count_b), int(count_a > 1), int(count_b > 1)
    if broadcast_shapes(batch_a, batch_b) == tuple(batch_a) == tuple(batch_b):
        return count_a, 1, 1
    return None


def _matmul_shapes(types: Types) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Both operands as (..., rows, cols): a vector a is a row, a vector b a column."""
    a, b = shape_of(types[0]), shape_of(types[1])
    return ((1, *a) if len(a) == 1 else a), ((*b, 1) if len(b) == 1 else b)


def matmul_supported(node: Node, types: Types, values: Values) -> bool:
    if not (is_float32(types[0]) and is_float32(types[1])):
        return False
    a, b = _matmul_shapes(types)
    return a[-1] == b[-2] and _matmul_batches(a, b) is not None


@opencl_kernel("MatMul", when=matmul_supported, name="opencl_matmul")
def opencl_matmul(node: Node, types: Types, values: Values) -> OpenCLStep:
    device = device_for_plan()
    a_shape, b_shape = _matmul_shapes(types)
    (out_type,) = get_op("MatMul").infer(node.attrs, types, values)
    out_shape = shape_of(out_type)
    batching = _matmul_batches(a_shape, b_shape)
    assert batching is not None  # matmul_supported
    batches, a_batched, b_batched = batching
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    variant = choose_variant(m, n, k, values[1] is not None and not b_batched, device.is_cpu)
    a_layout = Operand.row_major(m, k, batched=bool(a_batched))
    a_const = constant_on_device(device, values, 0)
    b_const: DeviceArray | None
    if values[1] is not None and not b_batched:
        b_const, b_layout = packed_weights(device, values[1].reshape(k, n), False, variant)
    else:
        b_const, b_layout = constant_on_device(device, values, 1), Operand.row_major(k, n, bool(b_batched))

    def launch(a: DeviceArray, b: DeviceArray) -> DeviceArray:
        a, b = either(a_const, a), either(b_const, b)
        y = DeviceArray.empty(device, out_shape)
        enqueue_gemm(device, variant, m, n, k, batches, a.buffer, a_layout, b.buffer, b_layout, y.buffer)
        return y

    return OpenCLStep(device, launch, variable_inputs(node, values, (0, 1)))
