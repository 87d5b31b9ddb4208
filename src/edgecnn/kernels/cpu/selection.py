"""The CPU kernels of every op family, in the order ``select_kernel`` tries them: the one place to
read (and change) which kernel a layer gets.

The first kernel whose heuristic (``when``) accepts a node runs it; the op's reference kernel is the
last resort. `edgecnn tune` may pick another kernel that can run the layer, per machine. Kernel
modules register with ``register(name, factory, when=...)``: the name's place in its family's list
becomes its priority. ``KERNEL_MODULES`` (this package's ``__init__``) is derived from this table:
each module is imported the first time a node of one of its family's ops is planned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.registry import KernelFactory, KernelPredicate, register_kernel


@dataclass(frozen=True)
class Family:
    """Ops that share their kernels, and those kernels as (name, module in this package), in the
    order they are tried."""

    ops: tuple[str, ...]
    kernels: tuple[tuple[str, str], ...]


FAMILIES: dict[str, Family] = {
    "conv": Family(
        ("Conv", "FusedConv"),
        (
            ("conv_1d", "conv.conv1d"),  # (N, C, L) inputs: taps along the row, read in place
            ("depthwise_lanes", "conv.depthwise_lanes"),  # depthwise, small maps or large filters: NHWC-like
            ("depthwise", "conv.steps"),  # one filter per channel: the direct depthwise loop
            ("sparse_conv", "sparse.steps"),  # pruned weights: only the nonzero taps
            # repeated filters (pruned weights keep sparse_conv): run the distinct ones, copy rows
            ("shared_filters", "rowstable"),
            ("gemv", "conv.gemv"),  # a window covering the whole input (1x1 on 1x1 maps): GEMV
            ("pointwise", "conv.steps"),  # 1x1 on the micro-kernel, its input read in place
            ("gemm_1x1", "conv.steps"),  # 1x1, unit strides: the input is the im2col matrix
            ("direct_rows", "conv.direct_rows"),  # direct, pixels as micro-kernel rows: no lanes lost
            ("winograd_f43", "conv.winograd"),  # 3x3, unit strides, where F(4x4, 3x3) pays
            ("winograd_f23", "conv.winograd"),  # 3x3, unit strides, where F(2x2, 3x3) pays
            ("pixel_rows", "conv.pixel_rows"),  # small maps: one GEMM with output pixels as rows
            ("direct_gemm", "conv.steps"),  # implicit GEMM on the micro-kernel: no im2col
            ("packed_gemm", "conv.steps"),  # im2col on the packed micro-kernel (no BLAS)
            ("im2col_gemm", "conv.steps"),  # everything else: im2col tiles on BLAS
        ),
    ),
    "conv_residual": Family(("FusedConvAdd",), (("conv_residual", "conv.residual"),)),
    "gemm": Family(
        ("Gemm", "FusedGemm"),
        (
            ("sparse_gemm", "sparse.steps"),  # pruned weights
            ("shared_features", "rowstable"),  # repeated weight columns (pruned ones keep sparse_gemm)
            ("gemm", "gemm.steps"),  # dense
        ),
    ),
    "activation": Family(
        ("Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSwish", "HardSigmoid"), (("activation", "eltwise"),)
    ),
    "int8_conv": Family(
        ("QLinearConv", "Int8Conv"),
        (
            ("int8_dot_conv", "int8.dot_conv"),  # one group, AVX2: the dot-product micro-kernel
            ("int8_depthwise", "int8.depthwise"),  # one filter per channel: the direct loop
            ("int8_im2col_gemm", "int8.steps"),  # everything else: im2col + widening int8 GEMM
        ),
    ),
    "int8_conv_add": Family(
        ("QLinearConvAdd",),
        (
            ("int8_dot_conv_add", "int8.dot_conv"),  # the Add in the dot-product GEMM's epilogue
            ("int8_conv_add", "int8.steps"),  # everything else: the convolution, then the Add
        ),
    ),
    "int8_dense": Family(("QLinearMatMul", "Int8Gemm"), (("int8_dense", "int8.steps"),)),
    "quantize": Family(("QuantizeLinear",), (("quantize_int8", "int8.steps"),)),
    "dequantize": Family(("DequantizeLinear",), (("dequantize_int8", "int8.steps"),)),
    "int8_add": Family(("QLinearAdd",), (("int8_add", "int8.eltwise"),)),  # same-shape inputs
    "int8_concat": Family(("QLinearConcat",), (("int8_concat", "int8.eltwise"),)),
    "int8_table": Family(("QLinearLeakyRelu",), (("int8_table", "int8.eltwise"),)),  # 256-entry lookup
    "int8_lrn": Family(("QLinearLRN",), (("int8_lrn", "int8.lrn"),)),  # DQ -> LRN -> Q in one pass
    "int8_average_pool": Family(("QLinearAveragePool",), (("int8_average_pool", "int8.pool"),)),  # 2-D
    "int8_global_pool": Family(("QLinearGlobalAveragePool",), (("int8_global_average_pool", "int8.pool"),)),
    "lrn": Family(("LRN",), (("lrn", "lrn"),)),
    "softmax": Family(("Softmax",), (("softmax", "softmax"),)),
    "binary": Family(("Add", "Sub", "Mul", "Div"), (("binary", "binary"),)),  # broadcast arithmetic
    "gelu": Family(("Gelu",), (("gelu", "gelu"),)),
    "layer_norm": Family(("LayerNormalization",), (("layer_norm", "layernorm"),)),
    "matmul": Family(("MatMul",), (("matmul", "matmul"),)),  # by a constant matrix
    "resize": Family(("Resize",), (("resize_nearest", "resize"),)),  # nearest, last two axes
    "concat": Family(("Concat",), (("concat", "concat"),)),  # where the arena cannot make it a view
    "split": Family(("Split",), (("split", "concat"),)),  # likewise
    "transpose": Family(("Transpose",), (("transpose", "transpose"),)),
    "pool": Family(
        ("MaxPool", "AveragePool", "FusedMaxPool", "FusedAveragePool"),
        (
            ("int8_max_pool", "int8.pool"),  # MaxPool of 8-bit data
            ("pool_1d", "pool.pool1d"),
            ("pool_2d", "pool.steps"),
        ),
    ),
    "global_pool": Family(("GlobalAveragePool", "GlobalMaxPool"), (("global_pool", "pool.steps"),)),
}


def _family_of(name: str) -> tuple[Family, int]:
    """The family listing kernel ``name`` and its priority (the first listed gets the highest)."""
    for family in FAMILIES.values():
        names = [kernel for kernel, _ in family.kernels]
        if name in names:
            return family, len(names) - names.index(name)
    raise KeyError(f"CPU kernel {name!r} is not listed in kernels/cpu/selection.py")


def register(
    name: str,
    factory: KernelFactory,
    *,
    when: KernelPredicate | None = None,
    applies: KernelPredicate | None = None,
) -> None:
    """Register ``factory`` as CPU kernel ``name`` for every op of its family, at its place in
    the family's order. Its rules also decline a node whose fused activation the compiled epilogue
    does not implement (one registered in edgecnn.ops since): the reference kernel runs it."""
    # imported here, not at the top: importing this package loads no compiled kernel module
    from edgecnn.kernels.cpu.gemm.epilogue import implements_activation

    def implementing(rule: KernelPredicate | None) -> KernelPredicate:
        def test(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
            return implements_activation(node) and (rule is None or rule(node, types, values))

        return test

    family, priority = _family_of(name)
    wrapped_applies = None if applies is None else implementing(applies)
    for op in family.ops:
        register_kernel(op, when=implementing(when), priority=priority, name=name, applies=wrapped_applies)(
            factory
        )


def kernel_modules() -> dict[str, tuple[str, ...]]:
    """Kernel module (in this package) -> the ops it registers kernels for, in table order."""
    modules: dict[str, tuple[str, ...]] = {}
    for family in FAMILIES.values():
        for _, module in family.kernels:
            known = modules.get(module, ())
            modules[module] = known + tuple(op for op in family.ops if op not in known)
    return modules
