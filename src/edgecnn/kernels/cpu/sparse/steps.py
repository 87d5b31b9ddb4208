"""Sparse-weight kernels for pruned layers (issue 5, seed 001's SpMV): Gemm / FusedGemm as CSR SpMV
(batch 1) or SpMM (batch > 1), and Conv / FusedConv as CSR weights x im2col columns.

The CSR is built from the constant weight when the plan is built, so a pruned model benefits
whatever file it came from. Each kernel is registered above its dense counterpart but applies only
when the weight's density is below its crossover (``CpuTuning.spmv_crossover`` and its
siblings); above it the dense kernel is faster and is chosen instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.setup import ConvKernel, conv_setup
from edgecnn.kernels.cpu.gemm.epilogue import activation_args
from edgecnn.kernels.cpu.gemm.steps import when_dense
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.sparse.csr import CsrMatrix, csr_from_dense, row_bounds, sparser_than
from edgecnn.kernels.cpu.sparse.loops import sparse_conv_2d, spmm, spmv
from edgecnn.kernels.cpu.system.common import constant_float32, scratch, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import call
from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning
from edgecnn.ops.dense import GemmAttrs

COLUMNS_BYTES = 1 << 18
"""Target size of one task's im2col columns in the sparse conv (half of a 512 KiB L2)."""


def gemm_rows(node: Node, types: Sequence[TensorType | None]) -> int:
    """M, the rows of activations a Gemm multiplies (its batch)."""
    attrs = node.attrs
    assert isinstance(attrs, GemmAttrs)
    a_shape = shape_of(types[0])
    return a_shape[1] if attrs.trans_a else a_shape[0]


def when_sparse_gemm(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """A dense-eligible Gemm whose weight is sparser than the crossover for its batch."""
    if not when_dense(node, types, values):
        return False
    weights = values[1]
    assert weights is not None
    tuning = active_cpu_tuning()
    crossover = tuning.spmv_crossover if gemm_rows(node, types) == 1 else tuning.spmm_crossover
    return sparser_than(weights, crossover)


def when_sparse_conv(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """A compiled-eligible, non-depthwise Conv whose weight is sparser than the crossover."""
    if not (
        single_output(node)
        and constant_float32(node, values, 1)
        and constant_float32(node, values, 2, optional=True)
    ):
        return False
    setup = conv_setup(node, types)
    weights = values[1]
    assert weights is not None
    return (
        setup is not None
        and not setup.depthwise
        and sparser_than(weights, active_cpu_tuning().conv_crossover)
    )


class SparseGemm:
    """Y = act(A' @ (alpha * B') + beta * C) with B' held as CSR rows (one per output)."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        attrs = node.attrs
        assert isinstance(attrs, GemmAttrs)
        b = values[1]
        assert b is not None
        self.trans_a = attrs.trans_a
        rows = gemm_rows(node, types)
        packed = b if attrs.trans_b else b.T  # (N, K)
        if attrs.alpha != 1.0:
            packed = packed * np.float32(attrs.alpha)
        self.csr: CsrMatrix = csr_from_dense(np.asarray(packed, dtype=np.float32))
        self.out_shape = (rows, self.csr.rows)
        c = values[2] if len(values) > 2 else None
        self.has_c = c is not None
        if c is not None:
            scaled = c if attrs.beta == 1.0 else c * np.float32(attrs.beta)
            self.addend = np.ascontiguousarray(np.broadcast_to(scaled.astype(np.float32), self.out_shape))
        else:
            self.addend = np.zeros((1, 1), dtype=np.float32)
        self.activation = activation_args(attrs)
        self.small = (self.csr.nnz + self.csr.rows) * rows < active_cpu_tuning().grain
        self._bounds: dict[int, np.ndarray] = {}

    def bounds(self, threads: int) -> np.ndarray:
        found = self._bounds.get(threads)
        if found is None:
            found = self._bounds[threads] = row_bounds(self.csr.indptr, threads)
        return found

    def __call__(self, a: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=np.float32)
        self.run_into(out, a)
        return out

    def run_into(self, out: np.ndarray, a: np.ndarray, *_: object) -> None:
        """Writes every element of ``out`` (C-contiguous (M, N); must not overlap ``a``)."""
        csr = self.csr
        bounds = self.bounds(1 if self.small else numba.get_num_threads())
        args = (csr.indptr, csr.indices, csr.values, self.addend, self.has_c, *self.activation)
        if self.out_shape[0] == 1:
            x = np.ascontiguousarray(a).reshape(-1)  # (1, K) or, transposed, (K, 1)
            call(spmv, self.small, x, *args, bounds, out.reshape(-1))
        else:
            a = np.ascontiguousarray(a.T if self.trans_a else a)  # (M, K)
            call(spmm, self.small, a, *args, bounds, out)


class SparseConv(ConvKernel):
    """im2col columns per pixel range times the CSR rows of the weights, then bias and activation."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        s = self.setup
        w = values[1]
        assert w is not None
        self.group_rows = s.in_channels // s.group * s.kernel[0] * s.kernel[1]  # Kg
        self.csr = csr_from_dense(np.asarray(w, dtype=np.float32).reshape(s.out_channels, self.group_rows))
        self.pointwise = s.pointwise
        work = s.batch * self.pixels * (self.csr.nnz + s.out_channels + self.group_rows * s.group)
        self.small = work < active_cpu_tuning().grain

    def steps(self, workers: int) -> tuple[int, int]:
        """(pixels, output channels) per task: a pixel range wide enough for long vector loops whose
        columns fit in COLUMNS_BYTES where possible, then channel ranges until every worker has a task."""
        s = self.setup
        out_per_group = s.out_channels // s.group
        fits = COLUMNS_BYTES // (4 * self.group_rows)
        per_image_group = -(-workers // (s.batch * s.group))  # tasks each (image, group) must give
        p_step = max(
            1,
            min(
                max(active_cpu_tuning().sparse_min_width, fits),
                -(-self.pixels // per_image_group),
                self.pixels,
            ),
        )
        p_tiles = -(-self.pixels // p_step)
        m_tiles = min(out_per_group, -(-per_image_group // p_tiles))
        return p_step, -(-out_per_group // m_tiles)

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes every element of ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        s = self.setup
        workers = 1 if self.small else numba.get_num_threads()
        p_step, m_step = self.steps(workers)
        if self.pointwise:
            columns = np.empty((workers, 1), dtype=np.float32)
        else:
            columns = scratch(workers * self.group_rows * p_step).reshape(workers, self.group_rows * p_step)
        csr = self.csr
        call(
            sparse_conv_2d,
            workers == 1,
            np.ascontiguousarray(x),
            csr.indptr,
            csr.indices,
            csr.values,
            s.group,
            self.bias,
            self.has_bias,
            *s.window,
            self.pointwise,
            *self.activation,
            p_step,
            m_step,
            columns,
            out,
        )


register("sparse_gemm", SparseGemm, when=when_sparse_gemm)
register("sparse_conv", SparseConv, when=when_sparse_conv)
