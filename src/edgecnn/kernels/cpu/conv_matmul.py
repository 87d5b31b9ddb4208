"""Convolution through ``np.matmul`` (numpy's BLAS with its own threads), for when the BLAS
library's sgemm cannot be called from compiled code (blas.AVAILABLE is False): im2col per image
with the compiled im2col, one batched GEMM over the groups, then the compiled epilogue."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.common import scratch
from edgecnn.kernels.cpu.conv_setup import ConvKernel
from edgecnn.kernels.cpu.epilogue import ActivationKind, bias_activation_
from edgecnn.kernels.cpu.im2col import im2col_2d
from edgecnn.kernels.cpu.threads import call, current_threads, is_small


class MatmulConvKernel(ConvKernel):
    """Adds the separate epilogue pass that runs after numpy's GEMM."""

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=np.float32)
        self.run_into(out, x)  # type: ignore[attr-defined]
        return out

    def epilogue(self, out: np.ndarray) -> None:
        """Bias and activation over the whole (N*M, pixels) output, skipped when there is neither."""
        if not self.has_bias and self.kind == ActivationKind.NONE:
            return
        bias = self.batched_bias if self.setup.batch > 1 and self.has_bias else self.bias
        rows = out.reshape(self.setup.batch * self.setup.out_channels, self.pixels)
        call(
            bias_activation_,
            is_small(out.size),
            rows,
            bias,
            self.has_bias,
            *self.activation,
        )

    @property
    def batched_bias(self) -> np.ndarray:
        tiled: np.ndarray | None = getattr(self, "_batched_bias", None)
        if tiled is None:
            tiled = np.ascontiguousarray(np.tile(self.bias, self.setup.batch))
            self._batched_bias = tiled
        return tiled


class Im2colMatmul(MatmulConvKernel):
    """im2col per image, then (G, Mg, Kg) @ (G, Kg, P) into the output through BLAS."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        s = self.setup
        w = values[1]
        assert w is not None
        self.rows = s.in_channels * s.kernel[0] * s.kernel[1]  # im2col rows: Kg * G
        group_rows = self.rows // s.group
        self.weights = np.ascontiguousarray(w.reshape(s.group, s.out_channels // s.group, group_rows))
        self.im2col_small = is_small(self.rows * self.pixels)

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        s = self.setup
        x = np.ascontiguousarray(x)
        columns = scratch(self.rows * self.pixels).reshape(self.rows, self.pixels)
        grouped_columns = columns.reshape(s.group, self.rows // s.group, self.pixels)
        grouped_out = out.reshape(s.batch, s.group, s.out_channels // s.group, self.pixels)
        for n in range(s.batch):
            call(
                im2col_2d,
                self.im2col_small,
                x[n],
                s.kernel[0],
                s.kernel[1],
                s.strides[0],
                s.strides[1],
                s.pads[0],
                s.pads[1],
                s.dilations[0],
                s.dilations[1],
                s.out[0],
                s.out[1],
                columns,
                1 if self.im2col_small else current_threads(),
            )
            np.matmul(self.weights, grouped_columns, out=grouped_out[n])
        self.epilogue(out)


class PointwiseMatmul(MatmulConvKernel):
    """1x1, stride 1, no padding: (G, Mg, Cg) @ x viewed as (N, G, Cg, H*W), no im2col."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        s = self.setup
        w = values[1]
        assert w is not None
        self.weights = np.ascontiguousarray(
            w.reshape(s.group, s.out_channels // s.group, s.in_channels // s.group)
        )

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        s = self.setup
        x = np.ascontiguousarray(x)
        grouped_x = x.reshape(s.batch, s.group, s.in_channels // s.group, self.pixels)
        grouped_out = out.reshape(s.batch, s.group, s.out_channels // s.group, self.pixels)
        if s.group == 1:  # one (M, C) @ (C, P) GEMM per image, without the batched-matmul loop
            for n in range(s.batch):
                np.matmul(self.weights[0], grouped_x[n, 0], out=grouped_out[n, 0])
        else:
            np.matmul(self.weights, grouped_x, out=grouped_out)
        self.epilogue(out)
