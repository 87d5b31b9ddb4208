"""How far one engine's tensor is from another's, judged against the other engine's own noise.

A layer is over tolerance when its largest absolute difference exceeds

    max(noise_factor * noise, rtol * scale, atol)       (and at least ``steps`` for integers)

where ``noise`` is how much the other engine's own result moves when only rounding changes (a
second configuration of that engine fed the input nudged by one ulp; see ``peer.py``) and
``scale`` is the largest magnitude in the other engine's tensor. Judging the absolute difference
against the tensor's scale, not element by element, keeps near-zero outputs (a sigmoid map that is
almost all 0, where 1e-30 against 0 is a relative error of 1) from reading as failures; the
relative and cosine columns are reported for the reader, not judged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STATUSES = ("ok", "over", "shape", "nan")
"""ok: within tolerance; over: beyond it; shape: the element counts differ; nan: NaN or infinity
where the other engine has none (or the reverse)."""


@dataclass(frozen=True)
class Tolerance:
    """The bar a layer's largest absolute difference is held to (module docstring)."""

    noise_factor: float = 10.0
    rtol: float = 1e-4
    atol: float = 0.0
    steps: float = 1.0
    """Integer (quantised) tensors: differences of this many stored steps are rounding, e.g. a
    fixed-point requantisation against a float one."""

    def bound(self, noise: float, scale: float, integer: bool = False) -> float:
        floor = self.steps if integer else 0.0
        return max(self.noise_factor * noise, self.rtol * scale, self.atol, floor)


@dataclass(frozen=True)
class TensorDiff:
    """One tensor of two engines compared (the other engine's value is the expected one)."""

    max_abs: float
    max_rel: float  # |a - b| / |b|, |b| floored at float32 resolution of the tensor's scale
    cosine: float  # 1.0 when both are all zeros
    scale: float  # max |b|
    noise: float  # the other engine's own change under rounding
    tolerance: float
    status: str  # one of STATUSES


def align(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray | None:
    """``theirs`` in the shape of ``ours``: as it is, or reshaped when only the element count
    agrees (engines that flatten, or keep a singleton axis); None when the counts differ. Layout
    changes are the peer's to undo: only it knows which tensors it holds channels-last."""
    if theirs.shape == ours.shape:
        return theirs
    if theirs.size == ours.size:
        return theirs.reshape(ours.shape)
    return None


def diff(ours: np.ndarray, theirs: np.ndarray, noise: float, tolerance: Tolerance) -> TensorDiff:
    """Compare ``ours`` with ``theirs`` (already aligned to the same shape)."""
    a = np.asarray(ours, np.float64).reshape(-1)
    b = np.asarray(theirs, np.float64).reshape(-1)
    finite_a, finite_b = np.isfinite(a), np.isfinite(b)
    both = finite_a & finite_b
    a_f, b_f = a[both], b[both]
    scale = float(np.abs(b_f).max()) if b_f.size else 0.0
    error = np.abs(a_f - b_f)
    max_abs = float(error.max()) if error.size else 0.0
    floor = max(scale * float(np.finfo(np.float32).eps), float(np.finfo(np.float32).tiny))
    max_rel = float((error / np.maximum(np.abs(b_f), floor)).max()) if error.size else 0.0
    bound = tolerance.bound(noise, scale, np.issubdtype(np.asarray(ours).dtype, np.integer))
    if not np.array_equal(finite_a, finite_b) or not np.array_equal(
        a[~finite_a], b[~finite_b], equal_nan=True
    ):
        status = "nan"
    else:
        status = "ok" if max_abs <= bound else "over"
    return TensorDiff(max_abs, max_rel, cosine(a_f, b_f), scale, noise, bound, status)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two flat float64 vectors (1.0 when both are zero, 0.0 when one is)."""
    norm_a, norm_b = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if norm_a == 0.0 and norm_b == 0.0:
        return 1.0
    if norm_a == 0.0 or norm_b == 0.0:
        return 0.0
    return float(np.dot(a, b) / (norm_a * norm_b))


def max_abs_change(base: np.ndarray, moved: np.ndarray) -> float:
    """The largest finite absolute change between two runs of one engine (its noise)."""
    a = np.asarray(base, np.float64).reshape(-1)
    b = np.asarray(moved, np.float64).reshape(-1)
    both = np.isfinite(a) & np.isfinite(b)
    return float(np.abs(a[both] - b[both]).max()) if both.any() else 0.0
