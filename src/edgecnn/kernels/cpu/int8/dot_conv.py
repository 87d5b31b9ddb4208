"""The int8 convolution on the dot-product micro-kernel (QLinearConv / Int8Conv, one group).

Prepared once per plan: the weights packed into the micro-kernel's panels (in the depth order of
the activations' layout: the image split into its stride phases, read in place) and
the loop chosen by them (`vpdpbusd` with VNNI; else `vpmaddubsw` on weights split so that no
pair can saturate int16, with per-panel fix-up groups, or the int16 loop where those would cost
more; see dot_kernel.py), the input zero point
folded into the int32 bias with the per-channel weight sums (for int8 input, shifted by the +128
that makes every activation unsigned). Per image: the image packed by stride phases and channel
units, padding with the zero point, then the GEMM, whose epilogue adds the bias, applies the per-channel
multiplier and the activation, rounds, adds the output zero point and saturates, tile by tile.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.int8.dot_gemm import (
    gemm_dot,
    groups_of,
    pack_image,
    pack_weights,
    phase_shape,
    phases_of,
    tap_offsets,
    tap_weights,
)
from edgecnn.kernels.cpu.int8.dot_kernel import COLUMNS, UNIT_S16, UNIT_U8S8, available, bytes_split, fix_ups
from edgecnn.kernels.cpu.int8.eltwise import NO_ADD
from edgecnn.kernels.cpu.int8.steps import (
    Int8ConvKernel,
    W,
    byte_scratch,
    residual_add,
    when_conv,
    when_conv_add,
)
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.threads import call
from edgecnn.kernels.registry import StepFn
from edgecnn.ops.quant_residual import SHORTCUT

ALIGN = 64
"""Byte alignment of the columns in the scratch buffer (whole cache lines)."""


class Int8DotConvKernel(Int8ConvKernel):
    """Int8ConvKernel's layer on the dot-product micro-kernel: packed weights, the image split into
    its stride phases and read in place."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        w = _weights(values)
        kh, kw, sh, sw, _, _, dh, dw = self.geometry
        split = bytes_split(tap_weights(w, UNIT_U8S8))
        self.bytes_mode = split is not None
        self.unit = UNIT_U8S8 if self.bytes_mode else UNIT_S16
        matrix = tap_weights(w, self.unit) if split is None else split[0]
        self.channel_units = groups_of(w.shape[1], self.unit)
        self.phases = phases_of((kh, kw), (sh, sw), (dh, dw))
        self.plane = phase_shape((self.out_hw[0], self.out_hw[1]), (kh, kw), (sh, sw), (dh, dw))
        self.rows = tap_offsets(self.channel_units, self.phases, self.plane, (kh, kw), (sh, sw), (dh, dw))
        self.fixes = fix_ups(None if split is None else split[1], w.shape[0], self.rows)
        virtual = self.out_hw[0] * self.plane[1]
        # the last blocks' virtual pixels and taps read past the last plane
        self.slack = (virtual + COLUMNS - 1) // COLUMNS * COLUMNS - virtual + self.plane[1] - self.out_hw[1]
        self.quads_shape = (self.channel_units, len(self.phases), *self.plane)
        self.layout_bytes = 4 * (int(np.prod(self.quads_shape)) + self.slack)
        self.packed = pack_weights(matrix, self.unit)
        self.groups = groups_of(matrix.shape[1], self.unit)
        self.offset = 128 if self.x_dtype == np.int8 else 0
        sums = w.reshape(w.shape[0], -1).astype(np.int64).sum(axis=1)
        self.bias = np.ascontiguousarray(self.bias.astype(np.int64) - self.offset * sums, dtype=np.int32)
        self.conv_first, self.add = True, NO_ADD

    def shortcut(self, rest: Sequence[object]) -> np.ndarray | None:
        """The tensor the epilogue adds to the output (QLinearConvAdd), or None."""
        return None

    def run_into(self, out: np.ndarray, x: np.ndarray, *rest: object) -> None:
        """Writes into ``out`` (C-contiguous, the planned shape and type; not a shortcut's buffer);
        the quantised input and the kernel's layout share one scratch buffer."""
        start = (self.input_bytes(x) + ALIGN - 1) // ALIGN * ALIGN
        buffer = byte_scratch(start + self.layout_bytes + ALIGN)
        q = self.quantized_input(x, buffer)
        first = start + (-buffer[start:].ctypes.data) % ALIGN
        flat = buffer[first : first + self.layout_bytes]
        units = flat.view(np.uint32)
        quads = units[: units.size - self.slack].reshape(self.quads_shape)
        slack = units[units.size - self.slack :]
        sh, sw, pad_top, pad_left = self.geometry[2:6]
        channels = out.shape[1]
        threads = 1 if self.small else numba.get_num_threads()
        shortcut = self.shortcut(rest)
        for n in range(q.shape[0]):
            target = out[n].reshape(channels, -1)
            residual = target[:0] if shortcut is None else shortcut[n].reshape(channels, -1)
            call(
                pack_image, self.small, q[n], sh, sw, pad_top, pad_left, self.phases, self.x_zp,
                self.offset, self.unit, quads, slack,
            )  # fmt: skip
            call(
                gemm_dot, self.small, self.packed, self.groups, self.bytes_mode, flat, self.rows, *self.fixes,
                self.plane[1], self.out_hw[1], self.bias, self.multiplier, *self.epilogue_args(), target,
                residual, self.conv_first, self.add, threads,
            )  # fmt: skip


class Int8DotConvAddKernel(Int8DotConvKernel):
    """QLinearConvAdd on the dot-product kernel: the shortcut added in the GEMM's epilogue, to each
    run of 8-bit outputs while it is in L1."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        self.conv_first, self.add = residual_add(node, values)

    def shortcut(self, rest: Sequence[object]) -> np.ndarray | None:
        return np.ascontiguousarray(rest[SHORTCUT - 1])


def _weights(values: Sequence[np.ndarray | None]) -> np.ndarray:
    w = values[W]
    assert w is not None
    return w


def when_dot_conv(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """One group, and numba compiling for AVX2 (the micro-kernel's instructions)."""
    return available() and node.attrs.group == 1 and when_conv(node, types, values)


def when_dot_conv_add(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """when_dot_conv's convolution, when_conv_add's shortcut and Add."""
    return available() and node.attrs.group == 1 and when_conv_add(node, types, values)


def int8_dot_conv(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> StepFn:
    return Int8DotConvKernel(node, types, values)


register("int8_dot_conv", int8_dot_conv, when=when_dot_conv)
register("int8_dot_conv_add", Int8DotConvAddKernel, when=when_dot_conv_add)

__all__ = ["Int8DotConvAddKernel", "Int8DotConvKernel"]
