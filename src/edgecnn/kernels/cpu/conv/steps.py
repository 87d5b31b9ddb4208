"""2-D Conv and FusedConv on the CPU, by algorithms chosen per layer:

- ``depthwise``: group == C_in > 1 (one filter set per channel) -> the direct depthwise loop;
- ``gemm_1x1``: 1x1 kernel, unit strides, no padding -> the input already *is* the im2col matrix;
- ``im2col_gemm``: everything else -> im2col, one GEMM per group and tile, the fused epilogue;
- ``packed_gemm``: the same tiles on edgecnn's own packed-weight GEMM (conv/packed.py), chosen
  where compiled code cannot call the BLAS library, and by `edgecnn tune` where it measures faster.

Weights are reshaped to the GEMM's layout once, when the plan is built. The BLAS kernels run as
tiles on numba's threads with single-threaded BLAS (conv/tiled_gemm.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.depthwise import depthwise_pass, pass_input, read_only
from edgecnn.kernels.cpu.conv.depthwise_bands import BAND_FLOATS
from edgecnn.kernels.cpu.conv.direct import DirectConv
from edgecnn.kernels.cpu.conv.packed import PackedConv
from edgecnn.kernels.cpu.conv.pointwise import PointwiseConv
from edgecnn.kernels.cpu.conv.setup import ConvKernel, ConvSetup, conv_setup
from edgecnn.kernels.cpu.conv.tiled_gemm import conv_gemm_2d, conv_gemm_2d_serial
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS, WIDE
from edgecnn.kernels.cpu.gemm.tiling import Tiling, plan_tiles, prefer_rows
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system import blas
from edgecnn.kernels.cpu.system.common import constant_float32, scratch, single_output
from edgecnn.kernels.cpu.system.threads import (
    blas_single_threaded,
    call,
    current_threads,
    is_small,
    max_threads,
    small_conv,
)
from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning


def micro_kernel_over_blas() -> bool:
    """Whether layers the BLAS tiles would take go to the micro-kernel's packed GEMM and direct
    kernel instead: by default where numba compiles for AVX-512 (``microkernel.WIDE``), whose
    16-float vectors double the micro-kernel's rate (``CpuTuning.micro_kernel_over_blas``)."""
    chosen = active_cpu_tuning().micro_kernel_over_blas
    return WIDE if chosen is None else chosen


def _compiled_setup(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> ConvSetup | None:
    """The layer's setup where compiled code can run it (constant float32 weights), else None."""
    if not (
        single_output(node)
        and constant_float32(node, values, 1)
        and constant_float32(node, values, 2, optional=True)
    ):
        return None
    return conv_setup(node, types)


def _compiled(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    return _compiled_setup(node, types, values) is not None


def when_depthwise(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    setup = _compiled_setup(node, types, values)
    return setup is not None and setup.depthwise


def when_pointwise(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """The BLAS tiles for 1x1 layers, unless the micro-kernel outruns them (micro_kernel_over_blas)."""
    if micro_kernel_over_blas():
        return False
    setup = _compiled_setup(node, types, values)
    return blas.AVAILABLE and setup is not None and setup.pointwise


def when_blas(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    """The BLAS tiles can run the layer: compiled code can call the library's sgemm."""
    return blas.AVAILABLE and _compiled(node, types, values)


def can_pack(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    """The packed-weight GEMM can run the layer (every compiled conv but depthwise)."""
    setup = _compiled_setup(node, types, values)
    return setup is not None and not setup.depthwise


def can_read_in_place(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """The in-place 1x1 kernel (conv/pointwise.py) can run the layer: 1x1, unit strides, no padding,
    one group."""
    if not _compiled(node, types, values):
        return False
    s = conv_setup(node, types)
    assert s is not None
    return s.pointwise and s.group == 1


def when_in_place(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """The in-place 1x1 kernel for layers at most ``pointwise_max_depth`` channels deep,
    ``narrow_depth`` deep with at most ``narrow_outputs`` output channels, or any depth on maps of
    ``deep_min_pixels`` or more (CpuTuning; conv/pointwise.py says why)."""
    if not can_read_in_place(node, types, values):
        return False
    s = conv_setup(node, types)
    assert s is not None
    tuning = active_cpu_tuning()
    narrow = s.in_channels <= tuning.narrow_depth and s.out_channels <= tuning.narrow_outputs
    large_map = s.out[0] * s.out[1] >= tuning.deep_min_pixels
    return s.in_channels <= tuning.pointwise_max_depth or narrow or large_map


def when_direct(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    """The direct kernel (conv/direct.py) where im2col costs most and its COLUMNS-pixel runs waste
    little: shallow filters (``max_direct_depth`` taps x channels) on maps whose rows fill the runs
    (``min_direct_fill``),
    except where im2col copies whole shifted rows (stride 1, output as wide as the input) for the
    BLAS tiles (not where micro_kernel_over_blas) and for 1x1 filters (every tap another channel
    plane; their im2col is a plain subsample)."""
    if not can_pack(node, types, values):
        return False
    s = conv_setup(node, types)
    assert s is not None
    depth = s.in_channels // s.group * s.kernel[0] * s.kernel[1]
    runs = -(-s.out[1] // COLUMNS) * COLUMNS
    shifted_rows = s.strides == (1, 1) and s.out[1] == s.width and not micro_kernel_over_blas()
    tuning = active_cpu_tuning()
    return (
        s.kernel != (1, 1)
        and not shifted_rows
        and depth <= tuning.max_direct_depth
        and s.out[1] >= tuning.min_direct_fill * runs
    )


def when_packed(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    """The packed-weight GEMM where no kernel before it (selection.py) takes the layer and BLAS
    cannot be called, and for strided 1x1 layers, ResNet's projection shortcuts: their im2col is a
    subsample that the BLAS tiles copy again into sgemm's panels, where the packed kernel copies it
    once. Elsewhere the BLAS tiles measured as fast or faster with AVX2, so `edgecnn tune` decides
    per layer there; with AVX-512 the packed GEMM takes every such layer (micro_kernel_over_blas)."""
    if not can_pack(node, types, values):
        return False
    s = conv_setup(node, types)
    assert s is not None
    strided_pointwise = s.kernel == (1, 1) and s.strides != (1, 1)
    return not blas.AVAILABLE or strided_pointwise or micro_kernel_over_blas()


class TiledConvGemm(ConvKernel):
    """im2col (skipped for 1x1) + GEMM + epilogue per output tile, tiles spread over numba's threads."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        s = self.setup
        w = values[1]
        assert w is not None
        self.group_rows = s.in_channels // s.group * s.kernel[0] * s.kernel[1]  # Kg
        self.weights = np.ascontiguousarray(
            w.reshape(s.group, s.out_channels // s.group, self.group_rows), dtype=np.float32
        )
        self.pointwise = s.pointwise
        macs = s.batch * s.out_channels * self.pixels * self.group_rows
        self.small = small_conv(macs)
        self._no_columns = np.empty((max_threads(), 1, 1), dtype=np.float32)  # 1x1: never read
        self.taps = self.im2col_taps()

    def plan_tiles(self, threads: int) -> Tiling:
        s = self.setup
        return plan_tiles(
            s.batch * s.group,
            s.out_channels // s.group,
            self.pixels,
            self.group_rows,
            threads,
            limit_columns=not self.pointwise,
            weight_bytes=self.weights[0].nbytes,
            rows_first=prefer_rows(s.out_channels // s.group, self.pixels, im2col=not self.pointwise),
        )

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        s = self.setup
        tiling = self.tiles(1 if self.small else current_threads())
        if self.pointwise:
            columns = self._no_columns[: tiling.workers]
        else:
            size = tiling.workers * self.group_rows * tiling.column_step
            columns = scratch(size).reshape(tiling.workers, self.group_rows, tiling.column_step)
        # one worker: the serial twin, which starts no parallel region (a few us per small layer)
        kernel = conv_gemm_2d_serial if tiling.workers == 1 else conv_gemm_2d
        with blas_single_threaded():
            kernel(
                np.ascontiguousarray(x),
                self.weights,
                self.bias,
                self.has_bias,
                *s.window,
                self.pointwise,
                *self.activation,
                tiling.row_step,
                tiling.column_step,
                self.taps,
                columns,
                out,
            )


class Depthwise(ConvKernel):
    """The direct depthwise loop with bias and activation fused into it."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        s = self.setup
        w = values[1]
        assert w is not None
        self.weights = read_only(np.ascontiguousarray(w.reshape(s.out_channels, s.kernel[0], s.kernel[1])))
        self.bias = read_only(self.bias)
        self.small = is_small(int(np.prod(self.out_shape)) * s.kernel[0] * s.kernel[1])
        self.compiled = depthwise_pass(s.kernel, s.strides, s.pads, s.dilations, s.out[1])

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        s = self.setup
        call(
            self.compiled,
            self.small,
            pass_input(x),
            self.weights,
            self.bias,
            self.has_bias,
            s.strides[0],
            s.strides[1],
            s.pads[0],
            s.pads[1],
            s.dilations[0],
            s.dilations[1],
            *self.activation,
            BAND_FLOATS,
            1 if self.small else current_threads(),
            out,
        )


register("depthwise", Depthwise, when=when_depthwise)
register("packed_gemm", PackedConv, when=when_packed, applies=can_pack)
register("direct_gemm", DirectConv, when=when_direct, applies=can_pack)
register("pointwise", PointwiseConv, when=when_in_place, applies=can_read_in_place)
register("gemm_1x1", TiledConvGemm, when=when_pointwise)
register("im2col_gemm", TiledConvGemm, when=when_blas)
