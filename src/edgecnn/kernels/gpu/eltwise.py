"""Add, Sub, Mul, Div on a GPU, device-agnostic: the ops and which nodes a GPU backend takes."""

from __future__ import annotations

from edgecnn.ir.graph import Node
from edgecnn.kernels.gpu.step import Types, Values, is_float32

BINARY_OPS = ("Add", "Sub", "Mul", "Div")
"""In the order of the OpenCL ``binary`` kernel's op codes."""


def binary_supported(node: Node, types: Types, values: Values) -> bool:
    return len(types) == 2 and is_float32(types[0]) and is_float32(types[1])
