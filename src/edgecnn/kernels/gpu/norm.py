"""LRN and Softmax on a GPU, device-agnostic: which nodes a GPU backend takes, and their layout."""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.gpu.step import Types, Values, is_float32, shape_of
from edgecnn.ops.activation import softmax_axes


def lrn_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0]) and (types[0].rank or 0) >= 2 and node.attrs.size >= 1


def lrn_params(node: Node, shape: tuple[int, ...]) -> tuple[np.int32 | np.float32, ...]:
    """(channels, elements per channel plane, size, alpha, beta, bias): the lrn kernel's arguments."""
    a = node.attrs
    return (np.int32(shape[1]), np.int32(np.prod(shape[2:])), np.int32(a.size), np.float32(a.alpha),
            np.float32(a.beta), np.float32(a.bias))  # fmt: skip


def softmax_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0]) and (types[0].rank or 0) >= 1


def softmax_lines(node: Node, types: Types) -> tuple[int, int, int]:
    """(outer, L, inner): the normalised axes are contiguous (one axis, or all from ``axis`` on), so
    the tensor is (outer, L, inner) and each (outer, inner) line is normalised along L."""
    shape = shape_of(types[0])
    axes = softmax_axes(node.attrs, len(shape))
    outer = int(np.prod(shape[: axes[0]]))
    length = int(np.prod([shape[a] for a in axes]))
    inner = int(np.prod(shape[axes[-1] + 1 :]))
    return outer, length, inner
