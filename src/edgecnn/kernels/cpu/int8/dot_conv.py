"""The int8 convolution on the dot-product micro-kernel (QLinearConv / Int8Conv, one group).

Prepared once per plan: the weights packed into the micro-kernel's panels and the loop chosen by
them (`vpmaddubsw` where no pair of weights can saturate int16, else the exact int16 loop; see
dot_kernel.py), the input zero point folded into the int32 bias with the per-channel weight sums
(for int8 input, shifted by the +128 that makes every activation unsigned). Per image: im2col
into the kernel's unit layout, padding with the zero point, then the GEMM, whose epilogue adds the
bias, applies the per-channel multiplier and the activation, rounds, adds the output zero point
and saturates, tile by tile.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.int8.dot_gemm import gemm_dot, groups_of, im2col_units, pack_weights, pixel_blocks
from edgecnn.kernels.cpu.int8.dot_kernel import COLUMNS, UNIT_S16, UNIT_U8S8, available, pairs_fit_int16
from edgecnn.kernels.cpu.int8.steps import Int8ConvKernel, byte_scratch, when_conv
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.threads import call
from edgecnn.kernels.registry import StepFn

ALIGN = 64
"""Byte alignment of the columns in the scratch buffer (whole cache lines)."""


class Int8DotConvKernel(Int8ConvKernel):
    """Int8ConvKernel's layer on the dot-product micro-kernel: packed weights, unit im2col."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        rows, depth = self.weights.shape[1], self.weights.shape[2]
        matrix = self.weights.reshape(rows, depth)
        self.bytes_mode = pairs_fit_int16(matrix)
        self.unit = UNIT_U8S8 if self.bytes_mode else UNIT_S16
        self.packed = pack_weights(matrix, self.unit)
        self.groups = groups_of(depth, self.unit)
        self.offset = 128 if self.x_dtype == np.int8 else 0
        sums = matrix.astype(np.int64).sum(axis=1)
        self.bias = np.ascontiguousarray(self.bias.astype(np.int64) - self.offset * sums, dtype=np.int32)
        self.blocks = pixel_blocks(self.columns[1])

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the planned shape and type); the quantised input and
        the columns share one scratch buffer."""
        start = (self.input_bytes(x) + ALIGN - 1) // ALIGN * ALIGN
        column_bytes = self.blocks * self.groups * COLUMNS * 4
        buffer = byte_scratch(start + column_bytes + ALIGN)
        q = self.quantized_input(x, buffer)
        first = start + (-buffer[start:].ctypes.data) % ALIGN
        flat = buffer[first : first + column_bytes]
        columns = flat.view(np.uint32).reshape(self.blocks, self.groups, COLUMNS)
        rows = out.shape[1]
        for n in range(q.shape[0]):
            call(
                im2col_units,
                self.small,
                q[n],
                *self.geometry,
                *self.out_hw,
                self.x_zp,
                self.offset,
                self.unit,
                columns,
            )
            call(
                gemm_dot,
                self.small,
                self.packed,
                self.groups,
                self.bytes_mode,
                flat,
                self.bias,
                self.multiplier,
                *self.epilogue_args(),
                out[n].reshape(rows, -1),
            )


def when_dot_conv(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """One group, and numba compiling for AVX2 (the micro-kernel's instructions)."""
    return available() and node.attrs.group == 1 and when_conv(node, types, values)


def int8_dot_conv(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> StepFn:
    return Int8DotConvKernel(node, types, values)


register("int8_dot_conv", int8_dot_conv, when=when_dot_conv)

__all__ = ["Int8DotConvKernel"]
