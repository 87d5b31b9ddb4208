"""The int8 convolution on the dot-product micro-kernel (QLinearConv / Int8Conv, one group).

Prepared once per plan: the weights packed into the micro-kernel's panels (in the depth order of
the layout the activations take: the image read in place for unit strides, im2col otherwise) and
the loop chosen by them (`vpdpbusd` with VNNI; else `vpmaddubsw` where no pair of weights can
saturate int16, and the exact int16 loop where one can; see dot_kernel.py), the input zero point
folded into the int32 bias with the per-channel weight sums (for int8 input, shifted by the +128
that makes every activation unsigned). Per image: the image packed by channel units (or im2col),
padding with the zero point, then the GEMM, whose epilogue adds the bias, applies the per-channel
multiplier and the activation, rounds, adds the output zero point and saturates, tile by tile.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.int8.dot_gemm import (
    gemm_dot,
    groups_of,
    im2col_units,
    pack_image,
    pack_weights,
    pixel_blocks,
    tap_offsets,
    tap_weights,
)
from edgecnn.kernels.cpu.int8.dot_kernel import COLUMNS, UNIT_S16, UNIT_U8S8, available, bytes_exact
from edgecnn.kernels.cpu.int8.steps import Int8ConvKernel, W, byte_scratch, when_conv
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.threads import call
from edgecnn.kernels.registry import StepFn

ALIGN = 64
"""Byte alignment of the columns in the scratch buffer (whole cache lines)."""


class Int8DotConvKernel(Int8ConvKernel):
    """Int8ConvKernel's layer on the dot-product micro-kernel: packed weights; the image read in
    place (unit strides) or im2col into the kernel's unit layout (other strides)."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        w = _weights(values)
        kh, kw, sh, sw, _, _, dh, dw = self.geometry
        self.in_place = (sh, sw) == (1, 1)
        matrix = tap_weights(w, UNIT_U8S8) if self.in_place else w.reshape(w.shape[0], -1)
        self.bytes_mode = bytes_exact(matrix)
        self.unit = UNIT_U8S8 if self.bytes_mode else UNIT_S16
        if self.in_place:
            matrix = tap_weights(w, self.unit)
            self.channel_units = groups_of(w.shape[1], self.unit)
            out_h, out_w = self.out_hw
            self.padded = (out_h + (kh - 1) * dh, out_w + (kw - 1) * dw)
            self.rows = tap_offsets(self.channel_units, *self.padded, (kh, kw), (dh, dw))
            self.block_stride = COLUMNS * 4
            self.row_pixels = self.padded[1]
            virtual = out_h * self.row_pixels
            self.slack = (virtual + COLUMNS - 1) // COLUMNS * COLUMNS - virtual + (kw - 1) * dw
            self.layout_bytes = 4 * (self.channel_units * self.padded[0] * self.padded[1] + self.slack)
        self.packed = pack_weights(matrix, self.unit)
        self.groups = groups_of(matrix.shape[1], self.unit)
        if not self.in_place:
            self.blocks = pixel_blocks(self.columns[1])
            self.rows = np.arange(self.groups, dtype=np.int64) * (COLUMNS * 4)
            self.block_stride = self.groups * COLUMNS * 4
            self.row_pixels = self.out_hw[1]
            self.layout_bytes = self.blocks * self.block_stride
        self.offset = 128 if self.x_dtype == np.int8 else 0
        sums = w.reshape(w.shape[0], -1).astype(np.int64).sum(axis=1)
        self.bias = np.ascontiguousarray(self.bias.astype(np.int64) - self.offset * sums, dtype=np.int32)

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the planned shape and type); the quantised input and
        the kernel's layout share one scratch buffer."""
        start = (self.input_bytes(x) + ALIGN - 1) // ALIGN * ALIGN
        buffer = byte_scratch(start + self.layout_bytes + ALIGN)
        q = self.quantized_input(x, buffer)
        first = start + (-buffer[start:].ctypes.data) % ALIGN
        flat = buffer[first : first + self.layout_bytes]
        units = flat.view(np.uint32)
        channels = out.shape[1]
        for n in range(q.shape[0]):
            if self.in_place:
                quads = units[: units.size - self.slack].reshape(self.channel_units, *self.padded)
                pad_top, pad_left = self.geometry[4], self.geometry[5]
                call(
                    pack_image,
                    self.small,
                    q[n],
                    pad_top,
                    pad_left,
                    self.x_zp,
                    self.offset,
                    self.unit,
                    quads,
                    units[units.size - self.slack :],
                )
            else:
                columns = units.reshape(self.blocks, self.groups, COLUMNS)
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
                self.rows,
                self.block_stride,
                self.row_pixels,
                self.out_hw[1],
                self.bias,
                self.multiplier,
                *self.epilogue_args(),
                out[n].reshape(channels, -1),
            )


def _weights(values: Sequence[np.ndarray | None]) -> np.ndarray:
    w = values[W]
    assert w is not None
    return w


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
