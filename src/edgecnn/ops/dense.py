"""Fully connected layers: Gemm and MatMul."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import Dim, TensorType
from edgecnn.ops.common import broadcast_shapes, check, first_type, input_type
from edgecnn.ops.registry import StepShapes, register_op
from edgecnn.ops.traits import gemm_macs, matmul_macs


@dataclass(frozen=True)
class GemmAttrs:
    """Y = alpha * A' @ B' + beta * C, with A' = A.T if trans_a (likewise B)."""

    alpha: float = 1.0
    beta: float = 1.0
    trans_a: bool = False
    trans_b: bool = False


def _same_dim(a: Dim, b: Dim, what: str) -> None:
    if isinstance(a, int) and isinstance(b, int):
        check(a == b, f"{what}: {a} != {b}")


def infer_gemm(attrs: GemmAttrs, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    a, b = first_type(types), input_type(types, 1, "B")
    if a.shape is None or b.shape is None:
        return [TensorType(a.dtype, (None, None))]
    check(len(a.shape) == 2 and len(b.shape) == 2, f"Gemm needs 2-D A and B, got {a} and {b}")
    m, k = reversed(a.shape) if attrs.trans_a else a.shape
    k2, n = reversed(b.shape) if attrs.trans_b else b.shape
    _same_dim(k, k2, "inner dimensions of A and B differ")
    c = types[2] if len(types) > 2 else None
    if c is not None and c.shape is not None:  # C broadcasts to Y, never Y to C
        check(len(c.shape) <= 2, f"Gemm's C must broadcast to [M, N], got rank {len(c.shape)} ({c})")
        out = broadcast_shapes((m, n), c.shape) or (m, n)
        check(
            all(not isinstance(x, int) or not isinstance(y, int) or x == y for x, y in zip(out, (m, n))),
            f"Gemm's C {c} does not broadcast to [{m}, {n}]",
        )
    return [TensorType(a.dtype, (m, n))]


def gemm_weight(attrs: GemmAttrs, values: Sequence[np.ndarray | None]) -> tuple[int, int] | None:
    """Constant 2-D B, [N, K] when ``trans_b`` else [K, N]: its output axis."""
    b = values[1] if len(values) > 1 else None
    if b is None or b.ndim != 2:
        return None
    return 1, 0 if attrs.trans_b else 1


def gemm_per_sample(step: StepShapes) -> bool:
    """Rows of A are the images unless A is transposed; a constant C must not vary by row."""
    c = step.constants[2] if len(step.constants) > 2 else None
    row_varying = c is not None and c.ndim == 2 and c.shape[0] != 1
    return not step.attrs.trans_a and not row_varying


@register_op(
    "Gemm",
    attrs=GemmAttrs,
    infer=infer_gemm,
    inputs=(2, 3),
    with_activation="FusedGemm",
    per_sample=gemm_per_sample,
    weight=gemm_weight,
    macs=gemm_macs(),
)
def gemm(attrs: GemmAttrs, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> np.ndarray:
    y = (a.T if attrs.trans_a else a) @ (b.T if attrs.trans_b else b)
    if attrs.alpha != 1.0:
        y = y * y.dtype.type(attrs.alpha)
    if c is not None:
        y = y + (c if attrs.beta == 1.0 else c * c.dtype.type(attrs.beta))
    return np.asarray(y, dtype=a.dtype, order="C")


def infer_matmul(attrs: object, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    a, b = first_type(types), input_type(types, 1, "B")
    if a.shape is None or b.shape is None:
        return [TensorType(a.dtype, None)]
    sa, sb = list(a.shape), list(b.shape)
    check(bool(sa) and bool(sb), "MatMul inputs must have rank >= 1")
    a_vector, b_vector = len(sa) == 1, len(sb) == 1
    if a_vector:
        sa = [1, *sa]
    if b_vector:
        sb = [*sb, 1]
    _same_dim(sa[-1], sb[-2], "inner dimensions differ")
    batch = broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2]))
    assert batch is not None  # None only where a shape is unknown
    shape = [*batch, *([] if a_vector else [sa[-2]]), *([] if b_vector else [sb[-1]])]
    return [TensorType(a.dtype, tuple(shape))]


def matmul_weight(attrs: object, values: Sequence[np.ndarray | None]) -> tuple[int, int] | None:
    """x @ W: W's last axis is the output; W @ x: W's rows are."""
    a, b = values[0], values[1]
    if b is not None and b.ndim >= 1:
        return 1, max(b.ndim - 1, 0)
    if a is not None and a.ndim >= 1:
        return 0, max(a.ndim - 2, 0)
    return None


def matmul_per_sample(step: StepShapes) -> bool:
    """Per image when B is a constant matrix (or vector) shared by every image."""
    b = step.constants[1]
    return b is not None and b.ndim <= 2


@register_op(
    "MatMul",
    infer=infer_matmul,
    inputs=2,
    per_sample=matmul_per_sample,
    weight=matmul_weight,
    macs=matmul_macs(),
)
def matmul(attrs: object, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.matmul(a, b), order="C")
