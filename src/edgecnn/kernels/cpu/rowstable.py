"""Convolutions whose filters repeat (``shared_filters``) and Gemms whose weight rows repeat
(``shared_features``): each distinct row is computed once and its result copied to every output
channel (or feature) that holds it, so identical filters give bit-identical channels.

Why: OpenBLAS's sgemm does not compute every row of its output with the same instruction sequence
(rows of one register block can be summed differently from rows of another), so two output channels with the same filter and the same input can differ by an ulp depending on
where they sit in the weight matrix. That is invisible in trained networks but decides ties: a
model whose filters are all one constant must give exactly equal logits. Computing a repeated filter
once makes the repeats equal by construction, and saves their multiply-adds.

Only exact (bitwise) repeats count, within a group-1 convolution or a Gemm with constant B. The
check runs once, when the plan is built, and costs a few sampled columns per row for weights
without repeats (trained weights have none, except pruned all-zero rows); the kernels are chosen
only where repeats exist, so other layers run unchanged. It makes identical rows equal; it does
not make BLAS's rounding independent of a row's position in general.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.setup import conv_setup
from edgecnn.kernels.cpu.gemm.epilogue import activate, activation_args
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import constant_float32, is_float32, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import call, is_small
from edgecnn.kernels.registry import StepFn, select_kernel
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs

SAMPLED_BLOCKS = 4
BLOCK_COLUMNS = 4
SAMPLED_COLUMNS = SAMPLED_BLOCKS * BLOCK_COLUMNS
"""Columns whose bits key a row: rows whose keys differ (almost all distinct rows) are never compared
whole. They come in blocks of adjacent columns spread over the row, so that a row's key reads a few
cache lines rather than one per column: when a plan is built, the weights are rarely in cache."""


@dataclass(frozen=True)
class RowSharing:
    """``matrix[first]`` are the distinct rows, in order of first appearance; row m equals
    ``matrix[first[inverse[m]]]``."""

    first: np.ndarray  # (U,) int64
    inverse: np.ndarray  # (M,) int64


_MULTIPLIERS = np.random.default_rng(0x5EED).integers(1, 2**63, SAMPLED_COLUMNS, dtype=np.uint64) | np.uint64(
    1
)
"""Odd 64-bit multipliers that mix a row's sampled bit patterns into one key (wrapping arithmetic)."""


def _bits(rows: np.ndarray) -> np.ndarray:
    """float32 values as their uint32 bit patterns, so that -0.0 != 0.0 and equal NaNs are equal."""
    return np.ascontiguousarray(rows, dtype=np.float32).view(np.uint32)


def _exact_groups(matrix: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
    """The given rows of ``matrix`` split into classes of bitwise-equal rows (each class ascending)."""
    block = _bits(matrix[rows])
    keys = block.view(np.dtype((np.void, block.shape[1] * block.itemsize))).ravel()
    _, labels = np.unique(keys, return_inverse=True)
    labels = labels.ravel()
    return [rows[labels == label] for label in np.unique(labels)]


def _sampled_columns(width: int) -> np.ndarray:
    """The columns that key each row: all of them for narrow rows, else SAMPLED_BLOCKS blocks of
    BLOCK_COLUMNS adjacent columns from the first to the last."""
    if width <= SAMPLED_COLUMNS:
        return np.arange(width, dtype=np.int64)
    starts = np.linspace(0, width - BLOCK_COLUMNS, SAMPLED_BLOCKS).astype(np.int64)
    return np.unique((starts[:, None] + np.arange(BLOCK_COLUMNS)).ravel())


def repeated_rows(matrix: np.ndarray) -> RowSharing | None:
    """Which rows of a 2-D float32 matrix are bitwise repeats of an earlier row; None if none are.

    Each row gets a 64-bit key mixed from a few sampled columns; only rows whose keys collide are
    compared in full, so a matrix without repeats costs one sort of ``rows`` keys.
    """
    if matrix.ndim != 2:
        raise ValueError(f"repeated_rows expects a 2-D matrix, got shape {matrix.shape}")
    rows, width = matrix.shape
    if rows < 2 or width == 0:
        return None
    sampled = _sampled_columns(width)
    with np.errstate(over="ignore"):
        keys = (_bits(matrix[:, sampled]).astype(np.uint64) * _MULTIPLIERS[: len(sampled)]).sum(
            axis=1, dtype=np.uint64
        )
    ordered = np.sort(keys)
    if not np.any(ordered[1:] == ordered[:-1]):
        return None
    _, key_labels, counts = np.unique(keys, return_inverse=True, return_counts=True)
    key_labels = key_labels.ravel()
    owner = np.arange(rows, dtype=np.int64)  # owner[m]: the first row equal to row m
    for label in np.flatnonzero(counts > 1):
        for group in _exact_groups(matrix, np.flatnonzero(key_labels == label)):
            owner[group] = group[0]
    first = np.flatnonzero(owner == np.arange(rows))
    if len(first) == rows:
        return None
    position = np.empty(rows, dtype=np.int64)
    position[first] = np.arange(len(first))
    return RowSharing(first=first, inverse=position[owner])


@numba.njit(parallel=True, cache=True, nogil=True)
def expand_rows(
    distinct: np.ndarray,  # (B, U, P): the distinct rows' raw results, per image (or batch row)
    inverse: np.ndarray,  # (M,): the distinct row each output row copies
    addend: np.ndarray,  # (1 or B, M): bias per output row, the same or one per image
    has_addend: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    out: np.ndarray,  # (B, M, P), written
) -> None:
    """out[b, m, p] = act(distinct[b, inverse[m], p] + addend[b or 0, m]); parallel over (b, m)."""
    batch, rows, pixels = out.shape
    per_image = addend.shape[0] > 1
    for task in numba.prange(batch * rows):
        n = task // rows
        m = task % rows
        source = distinct[n, inverse[m]]
        row = out[n, m]
        b = addend[n if per_image else 0, m] if has_addend else np.float32(0.0)
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
        self.bias = np.ascontiguousarray(
            (bias if bias is not None else np.zeros(1)).reshape(1, -1), dtype=np.float32
        )
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


register("shared_filters", SharedFilters, when=when_shared_filters)


def _features(node: Node, values: Sequence[np.ndarray | None]) -> np.ndarray:
    """B' as (N, K) rows: one row per output feature (column of Y)."""
    b = values[1]
    assert b is not None
    return b if node.attrs.trans_b else b.T


def when_shared_features(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """A float32 Gemm with constant 2-D B in which some output feature's weights occur twice."""
    if not (isinstance(node.attrs, GemmAttrs) and single_output(node) and len(types) >= 2):
        return False
    if not (
        is_float32(types[0], 2)
        and constant_float32(node, values, 1)
        and values[1] is not None
        and np.ndim(values[1]) == 2
    ):
        return False
    if not constant_float32(node, values, 2, optional=True):
        return False
    return repeated_rows(_features(node, values)) is not None


class SharedFeatures:
    """Gemm's counterpart of SharedFilters: the distinct weight rows of B' run as a plain Gemm (no C,
    no activation) with the registry's kernel, then every output column is copied from its row's
    result with beta * C and the activation applied."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        attrs = node.attrs
        assert isinstance(attrs, GemmAttrs) and types[1] is not None
        features = _features(node, values)
        sharing = repeated_rows(features)
        assert sharing is not None
        distinct = np.ascontiguousarray(features[sharing.first])
        plain = GemmAttrs(alpha=attrs.alpha, beta=1.0, trans_a=attrs.trans_a, trans_b=True)
        inner_node = replace(node, op="Gemm", inputs=node.inputs[:2], attrs=plain)
        inner_types = [types[0], TensorType(types[1].dtype, distinct.shape)]
        self.inner: StepFn = select_kernel(inner_node, inner_types, [values[0], distinct], "cpu").run
        a_shape = shape_of(types[0])
        rows = a_shape[1] if attrs.trans_a else a_shape[0]
        self.out_shape = (rows, features.shape[0])
        self.inverse = sharing.inverse
        c = values[2] if len(values) > 2 else None
        self.has_c = c is not None
        addend = np.zeros((1, 1), np.float32)
        if c is not None:
            scaled = c if attrs.beta == 1.0 else c * np.float32(attrs.beta)
            addend = np.broadcast_to(scaled.astype(np.float32), self.out_shape)
        self.addend = np.ascontiguousarray(addend, dtype=np.float32)
        self.activation = activation_args(attrs)
        self.small = is_small(rows * features.shape[0])

    def __call__(self, a: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=np.float32)
        self.run_into(out, a)
        return out

    def run_into(self, out: np.ndarray, a: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous (M, N); must not overlap ``a``)."""
        distinct = np.ascontiguousarray(self.inner(a))
        call(
            expand_rows,
            self.small,
            distinct.reshape(*distinct.shape, 1),
            self.inverse,
            self.addend,
            self.has_c,
            *self.activation,
            out.reshape(*self.out_shape, 1),
        )


register("shared_features", SharedFeatures, when=when_shared_features)
