"""Convolutions whose filters repeat: each distinct filter is computed once and its output channel
copied to every position that holds it, so identical filters give bit-identical channels.

Why: OpenBLAS's sgemm does not compute every row of its output with the same instruction sequence
(on Haswell-class CPUs rows 6-11 of each 12-row block are summed differently from rows 0-5), so
two output channels with the same filter and the same input can differ by an ulp depending on
where they sit in the weight matrix. That is invisible in trained networks but decides ties: the
ONNX suite's light SqueezeNet fills every filter with one constant, its 1000 logits should be
exactly equal (softmax 0.001 each), and an ulp of 1024 at ~1.4e10 turns the softmax into a
winner-takes-all among the rows one code path happened to round up. Computing a repeated filter
once makes the repeats equal by construction, and saves their multiply-adds.

Only exact (bitwise) repeats within a group-1 convolution count. The check runs once, when the plan
is built, and costs a few sampled columns per filter for weights without repeats (trained weights
have none, except pruned all-zero filters); the kernel is chosen only where repeats exist, so
other layers run unchanged. It makes identical filters equal; it does not make BLAS's rounding
independent of a row's position in general (a row-ordered GEMM that would was measured 1.7-1.9x
slower than OpenBLAS on the zoo's shapes: benchmarks/rowstable.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.common import constant_float32, single_output
from edgecnn.kernels.cpu.conv_setup import conv_setup
from edgecnn.kernels.cpu.epilogue import activate, activation_args
from edgecnn.kernels.cpu.threads import call, is_small
from edgecnn.kernels.registry import StepFn, register_kernel, select_kernel
from edgecnn.ops.conv import ConvAttrs

SAMPLED_COLUMNS = 16
"""Columns compared first: rows that differ there (almost all distinct rows) are never compared whole."""


@dataclass(frozen=True)
class RowSharing:
    """``matrix[first]`` are the distinct rows, in order of first appearance; row m equals
    ``matrix[first[inverse[m]]]``."""

    first: np.ndarray  # (U,) int64
    inverse: np.ndarray  # (M,) int64


def _exact_groups(bits: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
    """The given rows of ``bits`` split into classes of bitwise-equal rows (each class ascending)."""
    block = np.ascontiguousarray(bits[rows])
    keys = block.view(np.dtype((np.void, block.shape[1] * block.itemsize))).ravel()
    _, labels = np.unique(keys, return_inverse=True)
    labels = labels.ravel()
    return [rows[labels == label] for label in np.unique(labels)]


def repeated_rows(matrix: np.ndarray) -> RowSharing | None:
    """Which rows of a 2-D float32 matrix are bitwise repeats of an earlier row; None if none are.

    Rows are first grouped by a few sampled columns (cheap); only rows that share those are
    compared in full, so a matrix without repeats costs O(rows x SAMPLED_COLUMNS).
    """
    if matrix.ndim != 2:
        raise ValueError(f"repeated_rows expects a 2-D matrix, got shape {matrix.shape}")
    rows, width = matrix.shape
    if rows < 2 or width == 0:
        return None
    bits = np.ascontiguousarray(matrix, dtype=np.float32).view(np.uint32)
    sampled = np.unique(np.linspace(0, width - 1, min(width, SAMPLED_COLUMNS)).astype(np.int64))
    _, sample_labels = np.unique(bits[:, sampled], axis=0, return_inverse=True)
    sample_labels = sample_labels.ravel()
    counts = np.bincount(sample_labels)
    if counts.max() < 2:
        return None
    owner = np.arange(rows, dtype=np.int64)  # owner[m]: the first row equal to row m
    for label in np.flatnonzero(counts > 1):
        for group in _exact_groups(bits, np.flatnonzero(sample_labels == label)):
            owner[group] = group[0]
    first = np.flatnonzero(owner == np.arange(rows))
    if len(first) == rows:
        return None
    position = np.empty(rows, dtype=np.int64)
    position[first] = np.arange(len(first))
    return RowSharing(first=first, inverse=position[owner])


@numba.njit(parallel=True, cache=True)
def expand_rows(
    distinct: np.ndarray,  # (N, U, P): the distinct filters' raw outputs
    inverse: np.ndarray,  # (M,): the distinct row each output channel copies
    bias: np.ndarray,
    has_bias: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    out: np.ndarray,  # (N, M, P), written
) -> None:
    """out[n, m, p] = act(distinct[n, inverse[m], p] + bias[m]); parallel over (image, channel)."""
    batch, channels, pixels = out.shape
    for task in numba.prange(batch * channels):
        n = task // channels
        m = task % channels
        source = distinct[n, inverse[m]]
        row = out[n, m]
        b = bias[m] if has_bias else np.float32(0.0)
        if kind == 0:
            for p in range(pixels):
                row[p] = source[p] + b
        else:
            for p in range(pixels):
                row[p] = activate(source[p] + b, kind, alpha, low, high)


def _filters(values: Sequence[np.ndarray | None]) -> np.ndarray:
    w = values[1]
    assert w is not None
    return w.reshape(w.shape[0], -1)


def when_shared_filters(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """A float32 group-1 convolution with constant weights in which some filter occurs twice."""
    if not (single_output(node) and constant_float32(node, values, 1)):
        return False
    if not constant_float32(node, values, 2, optional=True):
        return False
    setup = conv_setup(node, types)
    if setup is None or setup.group != 1:
        return False
    return repeated_rows(_filters(values)) is not None


class SharedFilters:
    """Runs the distinct filters as a plain Conv (no bias, no activation) with whichever kernel the
    registry picks for it (GEMM, sparse, Winograd...), then writes every output channel from its
    filter's result with the channel's own bias and the activation."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        setup = conv_setup(node, types)
        assert setup is not None
        filters = _filters(values)
        sharing = repeated_rows(filters)
        assert sharing is not None
        w = values[1]
        assert w is not None and types[1] is not None
        distinct = np.ascontiguousarray(w[sharing.first])
        plain = ConvAttrs(**{f: getattr(node.attrs, f) for f in ConvAttrs.__dataclass_fields__})
        inner_node = replace(node, op="Conv", inputs=node.inputs[:2], attrs=plain)
        inner_types = [types[0], TensorType(types[1].dtype, distinct.shape)]
        self.inner: StepFn = select_kernel(inner_node, inner_types, [values[0], distinct], "cpu").run
        self.distinct_shape = (setup.batch, len(sharing.first), setup.out[0] * setup.out[1])
        self.inverse = sharing.inverse
        bias = values[2] if len(values) > 2 else None
        self.has_bias = bias is not None
        self.bias = np.ascontiguousarray(bias if bias is not None else np.zeros(1), dtype=np.float32)
        self.activation = activation_args(node.attrs)
        self.out_shape = (setup.batch, setup.out_channels, *setup.out)
        self.small = is_small(int(np.prod(self.out_shape)))

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=np.float32)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        distinct = np.ascontiguousarray(self.inner(x)).reshape(self.distinct_shape)
        call(
            expand_rows,
            self.small,
            distinct,
            self.inverse,
            self.bias,
            self.has_bias,
            *self.activation,
            out.reshape(self.out_shape[0], self.out_shape[1], -1),
        )


for _op in ("Conv", "FusedConv"):
    # Below sparse_conv (25): pruned weights, whose repeats are mostly all-zero filters, keep the sparse
    # kernel; above the dense GEMM and Winograd kernels, which then run the distinct filters.
    register_kernel(_op, when=when_shared_filters, priority=22, name="shared_filters")(SharedFilters)
