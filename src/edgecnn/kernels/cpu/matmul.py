"""MatMul by a constant matrix on the CPU (a linear layer over the last axis: ConvNeXt's MLP on a
channels-last map, a transformer's projections): the leading dimensions of A are rows of one GEMM,
run by the dense kernel (gemm/steps.py) on numba's threads, instead of numpy's batched matmul."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.gemm.steps import DenseGemm
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import constant_float32, is_float32, shape_of, single_output
from edgecnn.ops.dense import GemmAttrs


def when_matmul(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    b = values[1] if len(values) > 1 else None
    return (
        single_output(node)
        and len(types) == 2
        and is_float32(types[0])
        and len(shape_of(types[0])) >= 2
        and constant_float32(node, values, 1)
        and b is not None
        and b.ndim == 2
        and shape_of(types[0])[-1] == b.shape[0]
    )


class MatMul:
    """A (..., K) @ B (K, N) as the Gemm (M, K) x (K, N), M the product of A's leading dimensions."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        a_shape = shape_of(types[0])
        b = values[1]
        assert b is not None
        depth = a_shape[-1]
        self.rows = (math.prod(a_shape[:-1]), depth)
        self.shape = (*a_shape[:-1], b.shape[1])
        gemm = Node("Gemm", node.name, list(node.inputs[:2]), list(node.outputs), GemmAttrs())
        self.gemm = DenseGemm(gemm, [TensorType("float32", self.rows), types[1]], [None, b])

    def __call__(self, a: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.shape, np.float32)
        self.run_into(out, a)
        return out

    def run_into(self, out: np.ndarray, a: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, A's leading dimensions by N; must not overlap ``a``)."""
        self.gemm.run_into(
            out.reshape(self.rows[0], self.shape[-1]), np.ascontiguousarray(a).reshape(self.rows)
        )


register("matmul", MatMul, when=when_matmul)
