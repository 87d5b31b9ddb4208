"""Gemm and FusedGemm on the CPU: Y = act(A' @ (alpha * B') + beta * C). alpha is folded into the
weights and beta * C broadcast to Y's shape when the plan is built; the GEMM runs as tiles on
numba's threads (gemm/dense_tiles.py), or through ``np.matmul`` where compiled code cannot call BLAS."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.gemm.dense_tiles import dense_gemm, dense_gemm_serial
from edgecnn.kernels.cpu.gemm.epilogue import ActivationKind, activation_args, add_activation_
from edgecnn.kernels.cpu.gemm.tiling import Tiling, plan_tiles
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system import blas
from edgecnn.kernels.cpu.system.common import constant_float32, is_float32, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import (
    blas_single_threaded,
    call,
    current_threads,
    is_small,
)
from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning
from edgecnn.ops.dense import GemmAttrs


def when_dense(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    return (
        isinstance(node.attrs, GemmAttrs)
        and single_output(node)
        and len(types) >= 2
        and is_float32(types[0], 2)
        and constant_float32(node, values, 1)
        and values[1] is not None
        and np.ndim(values[1]) == 2
        and constant_float32(node, values, 2, optional=True)
    )


class DenseGemm:
    """The weights packed as (N, K) rows (alpha applied), the addend as an (M, N) array."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        attrs = node.attrs
        assert isinstance(attrs, GemmAttrs)
        a_shape = shape_of(types[0])
        b = values[1]
        assert b is not None
        self.trans_a = attrs.trans_a
        rows = a_shape[1] if attrs.trans_a else a_shape[0]
        self.depth = a_shape[0] if attrs.trans_a else a_shape[1]
        packed = b if attrs.trans_b else b.T  # (N, K)
        if attrs.alpha != 1.0:
            packed = packed * np.float32(attrs.alpha)
        self.weights = np.ascontiguousarray(packed, dtype=np.float32)
        self.out_shape = (rows, self.weights.shape[0])
        c = values[2] if len(values) > 2 else None
        self.has_c = c is not None
        if c is not None:
            scaled = c if attrs.beta == 1.0 else c * np.float32(attrs.beta)
            self.addend = np.ascontiguousarray(np.broadcast_to(scaled.astype(np.float32), self.out_shape))
        else:
            self.addend = np.zeros((1, 1), dtype=np.float32)
        self.activation = activation_args(attrs)  # (kind, negative slope, low, high)
        self.kind = self.activation[0]
        self.small = rows * self.out_shape[1] * self.depth < active_cpu_tuning().gemm_grain
        self._tilings: dict[int, Tiling] = {}
        self.serial_tiling = self.tiling(1)

    def tiling(self, threads: int) -> Tiling:
        tiling = self._tilings.get(threads)
        if tiling is None:
            rows, columns = self.out_shape
            tiling = plan_tiles(1, rows, columns, self.depth, threads, limit_columns=False)
            self._tilings[threads] = tiling
        return tiling

    def __call__(self, a: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=np.float32)
        self.run_into(out, a)
        return out

    def run_into(self, out: np.ndarray, a: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous (M, N); must not overlap ``a``). With trans_a, A.T is
        copied first (an allocation per call; no model in the zoo has it)."""
        a = np.ascontiguousarray(a.T if self.trans_a else a)
        if not blas.AVAILABLE:
            self.numpy_gemm(a, out)
            return
        tiling = self.serial_tiling if self.small else self.tiling(current_threads())
        # one worker: the serial twin, which starts no parallel region and needs no thread switch
        kernel = dense_gemm_serial if tiling.workers == 1 else dense_gemm
        with blas_single_threaded():
            kernel(
                a,
                self.weights,
                self.addend,
                self.has_c,
                *self.activation,
                tiling.row_step,
                tiling.column_step,
                tiling.workers,
                out,
            )

    def numpy_gemm(self, a: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The same through numpy's BLAS (its own threads) and the compiled epilogue."""
        np.matmul(a, self.weights.T, out=out)
        if self.has_c or self.kind != ActivationKind.NONE:
            call(
                add_activation_,
                is_small(out.size),
                out.reshape(-1),
                self.addend.reshape(-1),
                self.has_c,
                *self.activation,
            )
        return out


register("gemm", DenseGemm, when=when_dense)
