"""Gemm and FusedGemm on a GPU, device-agnostic: which nodes a GPU backend takes, and their sizes."""

from __future__ import annotations

from edgecnn.ir.graph import Node
from edgecnn.kernels.gpu.activations import applies_activation
from edgecnn.kernels.gpu.step import Types, Values, is_float32, shape_of


def gemm_supported(node: Node, types: Types, values: Values) -> bool:
    """Float32 2-D operands, a C of rank 2 at most, and an activation the device source applies."""
    c = types[2] if len(types) > 2 else None
    if not applies_activation(node) or not (is_float32(types[0], 2) and is_float32(types[1], 2)):
        return False
    return c is None or (is_float32(c) and c.rank is not None and c.rank <= 2)


def gemm_sizes(node: Node, types: Types) -> tuple[int, int, int]:
    """(m, k, n) of alpha * A' @ B' with A' (m x k) and B' (k x n), after the node's transposes."""
    a_shape, b_shape = shape_of(types[0]), shape_of(types[1])
    m, k = (a_shape[1], a_shape[0]) if node.attrs.trans_a else a_shape
    n = b_shape[0] if node.attrs.trans_b else b_shape[1]
    return m, k, n
