"""2-D Conv and FusedConv on the CPU, by algorithms chosen per layer:

- ``depthwise``: group == C_in > 1 (one filter set per channel) -> the direct depthwise loop;
- ``gemm_1x1``: 1x1 kernel, unit strides, no padding -> the input already *is* the im2col matrix;
- ``im2col_gemm``: everything else -> im2col, one GEMM per group and tile, the fused epilogue;
- ``packed_gemm``: the same tiles on edgecnn's own packed-weight GEMM (conv_packed.py), chosen
  where compiled code cannot call the BLAS library, and by `edgecnn tune` where it measures faster.

Weights are reshaped to the GEMM's layout once, when the plan is built. The BLAS kernels run as
tiles on numba's threads with single-threaded BLAS (conv_gemm.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.depthwise import depthwise_conv_2d
from edgecnn.kernels.cpu.conv.direct import DirectConv
from edgecnn.kernels.cpu.conv.packed import PackedConv
from edgecnn.kernels.cpu.conv.pointwise import (
    DEEP_MIN_PIXELS,
    MAX_DEPTH,
    NARROW_DEPTH,
    NARROW_OUTPUTS,
    PointwiseConv,
)
from edgecnn.kernels.cpu.conv.setup import ConvKernel, conv_setup
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

READ_IN_PLACE = True
"""Whether narrow 1x1 layers get the in-place kernel (``when_in_place``; off: the BLAS tiles)."""

PACK_STRIDED_POINTWISE = True
"""Whether strided 1x1 layers get the packed-weight GEMM (``when_packed``; off: the BLAS tiles)."""

MICRO_KERNEL_OVER_BLAS = WIDE
"""Whether layers the BLAS tiles would take go to the micro-kernel's packed GEMM and direct kernel
instead: where numba compiles for AVX-512, whose 16-float vectors double the micro-kernel's rate
(``microkernel.WIDE``). On the 2-core AVX-512 EPYC, with numpy's OpenBLAS on its AVX2 kernels
(this machine's OPENBLAS_CORETYPE=Haswell), packed_gemm took 0.55-0.75x of gemm_1x1's time on every
1x1 layer of ResNet-50 and the direct kernel 0.55-0.67x of im2col_gemm's on tiny-YOLO's stride-1
3x3 layers (benchmarks/conv_gap.py, docs/conv-gap.md, "AVX-512")."""

MAX_DIRECT_DEPTH, MIN_DIRECT_FILL = 400, 0.6
"""``when_direct``'s thresholds, from benchmarks/direct_conv.py and benchmarks/conv_gap.py (2 threads,
docs/conv-gap.md, "Direct convolution"): the direct kernel beat im2col + BLAS on every stem with
3 input channels (ResNet's and GoogLeNet's 7x7/2, AlexNet's 11x11/4 at depth 363, the 3x3/2 of
SqueezeNet, MobileNetV2 and SimpleCNN) and on LeNet's and SimpleCNN's small layers; it lost at depth
576 (ResNet's 64->128 3x3/2, 13%), on an 8-wide map whose rows fill half of a 16-pixel run
(SimpleCNN's Conv_6, 10%), and inside tiny-YOLO on its SAME stride-1 layers, where im2col is one
shifted copy per row."""


def _compiled(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    return (
        single_output(node)
        and constant_float32(node, values, 1)
        and constant_float32(node, values, 2, optional=True)
        and conv_setup(node, types) is not None
    )


def when_depthwise(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    return _compiled(node, types, values) and conv_setup(node, types).depthwise  # type: ignore[union-attr]


def when_pointwise(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """The BLAS tiles for 1x1 layers, unless the micro-kernel outruns them (MICRO_KERNEL_OVER_BLAS)."""
    if MICRO_KERNEL_OVER_BLAS:
        return False
    return when_blas(node, types, values) and conv_setup(node, types).pointwise  # type: ignore[union-attr]


def when_blas(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    """The BLAS tiles can run the layer: compiled code can call the library's sgemm."""
    return blas.AVAILABLE and _compiled(node, types, values)


def can_pack(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    """The packed-weight GEMM can run the layer (every compiled conv but depthwise)."""
    return _compiled(node, types, values) and not conv_setup(node, types).depthwise  # type: ignore[union-attr]


def can_read_in_place(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """The in-place 1x1 kernel (conv_pointwise.py) can run the layer: 1x1, unit strides, no padding,
    one group."""
    if not _compiled(node, types, values):
        return False
    s = conv_setup(node, types)
    assert s is not None
    return s.pointwise and s.group == 1


def when_in_place(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """The in-place 1x1 kernel for layers at most MAX_DEPTH channels deep, NARROW_DEPTH deep with
    at most NARROW_OUTPUTS output channels, or any depth on maps of DEEP_MIN_PIXELS or more
    (conv_pointwise.py says where the limits come from)."""
    if not can_read_in_place(node, types, values):
        return False
    s = conv_setup(node, types)
    assert s is not None
    narrow = s.in_channels <= NARROW_DEPTH and s.out_channels <= NARROW_OUTPUTS
    large_map = s.out[0] * s.out[1] >= DEEP_MIN_PIXELS
    return READ_IN_PLACE and (s.in_channels <= MAX_DEPTH or narrow or large_map)


def when_direct(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    """The direct kernel (conv_direct.py) where im2col costs most and its COLUMNS-pixel runs waste
    little: shallow filters (MAX_DIRECT_DEPTH taps x channels) on maps whose rows fill the runs,
    except where im2col copies whole shifted rows (stride 1, output as wide as the input) for the
    BLAS tiles (not where MICRO_KERNEL_OVER_BLAS) and for 1x1 filters (every tap another channel
    plane; their im2col is a plain subsample)."""
    if not can_pack(node, types, values):
        return False
    s = conv_setup(node, types)
    assert s is not None
    depth = s.in_channels // s.group * s.kernel[0] * s.kernel[1]
    runs = -(-s.out[1] // COLUMNS) * COLUMNS
    shifted_rows = s.strides == (1, 1) and s.out[1] == s.width and not MICRO_KERNEL_OVER_BLAS
    return (
        s.kernel != (1, 1)
        and not shifted_rows
        and depth <= MAX_DIRECT_DEPTH
        and s.out[1] >= MIN_DIRECT_FILL * runs
    )


def when_packed(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    """The packed-weight GEMM where no other kernel's rule takes the layer and BLAS cannot be
    called (priority 11: below the Winograd, direct, sparse and repeated-filter kernels, above
    im2col_gemm), and for strided 1x1 layers, ResNet's projection shortcuts: their im2col is a
    subsample that the BLAS tiles copy again into sgemm's panels, where the packed kernel copies it
    once (docs/conv-gap.md's per-layer tables: 7-16% faster on ResNet-50's three in one run, 7-11%
    faster on two and even on the third in the next). Elsewhere the BLAS tiles measured as fast or
    faster on most of ResNet's layers with AVX2 ("Packed-weight GEMM"), so `edgecnn tune` decides
    per layer there; with AVX-512 the packed GEMM takes every such layer (MICRO_KERNEL_OVER_BLAS)."""
    if not can_pack(node, types, values):
        return False
    s = conv_setup(node, types)
    assert s is not None
    strided_pointwise = PACK_STRIDED_POINTWISE and s.kernel == (1, 1) and s.strides != (1, 1)
    return not blas.AVAILABLE or strided_pointwise or MICRO_KERNEL_OVER_BLAS


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
        self.weights = np.ascontiguousarray(w.reshape(s.out_channels, s.kernel[0], s.kernel[1]))
        self.small = is_small(int(np.prod(self.out_shape)) * s.kernel[0] * s.kernel[1])

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        s = self.setup
        call(
            depthwise_conv_2d,
            self.small,
            np.ascontiguousarray(x),
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
            1 if self.small else current_threads(),
            out,
        )


register("depthwise", Depthwise, when=when_depthwise)
register("packed_gemm", PackedConv, when=when_packed, applies=can_pack)
register("direct_gemm", DirectConv, when=when_direct, applies=can_pack)
register("pointwise", PointwiseConv, when=when_in_place, applies=can_read_in_place)
register("gemm_1x1", TiledConvGemm, when=when_pointwise)
register("im2col_gemm", TiledConvGemm, when=when_blas)
