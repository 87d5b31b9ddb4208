"""Finite-difference checks of the training backward passes (float64, central differences)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from edgecnn.train.registry import Context, get_grad


def numeric_grad(f: Any, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    grad = np.zeros_like(x)
    flat, out = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        saved = flat[i]
        flat[i] = saved + eps
        high = f()
        flat[i] = saved - eps
        low = f()
        flat[i] = saved
        out[i] = (high - low) / (2 * eps)
    return grad


def check_op_gradients(
    op: str, attrs: Any, inputs: Sequence[np.ndarray | None], slots: Sequence[int], seed: int = 0
) -> None:
    """Compare the analytic gradient of sum(R * op(inputs)) with central differences for ``slots``."""
    grad_def = get_grad(op)
    assert grad_def is not None
    values = [None if x is None else np.array(x, dtype=np.float64) for x in inputs]
    ctx = Context(training=True, rng=np.random.default_rng(seed))
    result = grad_def.forward(attrs, values, ctx)
    weights = np.random.default_rng(seed + 1).standard_normal(result.outputs[0].shape)

    def objective() -> float:
        again = grad_def.forward(attrs, values, Context(training=True, rng=np.random.default_rng(seed)))
        return float((again.outputs[0] * weights).sum())

    needed = [i in slots for i in range(len(values))]
    analytic = grad_def.backward(attrs, result.cache, weights, needed)
    for slot in slots:
        expected = numeric_grad(objective, values[slot])  # type: ignore[arg-type]
        got = analytic[slot]
        assert got is not None, f"{op}: no gradient for input {slot}"
        assert got.shape == values[slot].shape  # type: ignore[union-attr]
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7, err_msg=f"{op} input {slot}")


def toy_dataset(n: int = 96, size: int = 16, seed: int = 0) -> Any:
    """Three classes a small net learns in a few steps: a bright bar on the left, the right, or the top."""
    from edgecnn.train.data import Dataset

    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 3
    images = rng.uniform(0, 0.3, (n, 1, size, size)).astype(np.float32)
    half = size // 2
    images[labels == 0, :, :, :half] += 0.7
    images[labels == 1, :, :, half:] += 0.7
    images[labels == 2, :, :half, :] += 0.7
    return Dataset(images, labels.astype(np.int64), ("left", "right", "top"), "toy")


def small_lenet(seed: int = 0) -> Any:
    from edgecnn.train.lenet import build_lenet5

    return build_lenet5(classes=3, size=16, seed=seed, widths=(4, 6, 16))
