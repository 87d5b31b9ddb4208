"""Compressed-sparse-row weights for the sparse kernels (sparse.py), built from a constant weight when
the plan is built, and the measured densities below which a sparse kernel beats the dense one.

Whatever file a model came from, a pruned weight is just a dense array with many zeros; the plan
finds its density and, below the crossover, packs it here: ``indptr`` (int32, rows + 1), ``indices``
(uint16 when the columns fit, else int32: fewer bytes streamed per non-zero) and float32 ``values``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

UINT16_COLUMNS = 1 << 16
"""Matrices with at most this many columns store their column indices as uint16."""


@dataclass(frozen=True)
class CsrMatrix:
    """A (rows, cols) float32 matrix in CSR form; ``indices`` are sorted within each row."""

    rows: int
    cols: int
    indptr: np.ndarray  # int32[rows + 1]
    indices: np.ndarray  # uint16 or int32 [nnz]
    values: np.ndarray  # float32[nnz]

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    @property
    def density(self) -> float:
        return self.nnz / (self.rows * self.cols) if self.rows * self.cols else 0.0

    def nbytes(self) -> int:
        return self.indptr.nbytes + self.indices.nbytes + self.values.nbytes

    def to_dense(self) -> np.ndarray:
        """The dense matrix (for tests and checks)."""
        dense = np.zeros((self.rows, self.cols), np.float32)
        rows = np.repeat(np.arange(self.rows), np.diff(self.indptr))
        dense[rows, self.indices.astype(np.int64)] = self.values
        return dense


def index_dtype(cols: int) -> np.dtype:
    """The narrowest index type for ``cols`` columns (uint16 up to 65536 columns, else int32)."""
    if cols <= UINT16_COLUMNS:
        return np.dtype(np.uint16)
    if cols <= np.iinfo(np.int32).max + 1:
        return np.dtype(np.int32)
    raise ValueError(f"{cols} columns do not fit int32 column indices")


def density(weights: np.ndarray) -> float:
    """Fraction of elements that are not zero (NaN counts as non-zero); 1.0 for an empty array."""
    return np.count_nonzero(weights) / weights.size if weights.size else 1.0


SCAN_CHUNK = 1 << 16
"""Elements counted at a time by ``sparser_than`` between its checks."""


def sparser_than(weights: np.ndarray, fraction: float) -> bool:
    """``density(weights) < fraction``, answered as soon as the count settles it: a dense layer is
    rejected after reading a little over ``fraction`` of its elements. Every plan asks this of every
    conv and FC layer (the sparse kernels' rule), so on a dense model the full count was a pass over
    all the weights in every first inference (issue 4: start-up)."""
    if not weights.size:
        return False
    flat = weights.reshape(-1)
    limit = fraction * flat.size  # sparser iff the count stays below this
    count = 0
    for start in range(0, flat.size, SCAN_CHUNK):
        count += int(np.count_nonzero(flat[start : start + SCAN_CHUNK]))
        if count >= limit:
            return False
    return count < limit


def csr_from_dense(matrix: np.ndarray) -> CsrMatrix:
    """Pack a 2-D array's non-zero elements (NaN and infinities included) as float32 CSR."""
    if matrix.ndim != 2:
        raise ValueError(f"CSR needs a 2-D matrix, got shape {matrix.shape}")
    rows, cols = matrix.shape
    mask = matrix != 0
    counts = mask.sum(axis=1)
    if counts.sum() > np.iinfo(np.int32).max:
        raise ValueError("more than 2**31 - 1 non-zeros")
    indptr = np.zeros(rows + 1, np.int32)
    np.cumsum(counts, out=indptr[1:])
    indices = np.nonzero(mask)[1].astype(index_dtype(cols))
    values = np.ascontiguousarray(matrix[mask], dtype=np.float32)
    return CsrMatrix(rows, cols, indptr, indices, values)


def row_bounds(indptr: np.ndarray, parts: int) -> np.ndarray:
    """``parts + 1`` row boundaries that split the rows into ranges of about equal non-zeros (plus one
    unit per row, so that rows without non-zeros still cost their output write)."""
    rows = len(indptr) - 1
    parts = max(1, min(parts, rows)) if rows else 1
    work = indptr.astype(np.int64) + np.arange(rows + 1, dtype=np.int64)
    targets = work[-1] * np.arange(parts + 1, dtype=np.int64) // parts
    bounds = np.searchsorted(work, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, rows
    return np.maximum.accumulate(bounds)
