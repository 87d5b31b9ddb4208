"""Softmax cross-entropy on logits: the loss and its gradient in one stable pass."""

from __future__ import annotations

import numpy as np

from edgecnn.errors import InputError


def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of ``labels`` (N,) under softmax(``logits`` (N, K)), and d loss / d logits."""
    if logits.ndim != 2 or labels.shape != (logits.shape[0],):
        raise InputError(
            f"expected logits (N, K) and labels (N,), got {list(logits.shape)} and {list(labels.shape)}"
        )
    if labels.size and (labels.min() < 0 or labels.max() >= logits.shape[1]):
        raise InputError(f"labels must be in 0..{logits.shape[1] - 1}, got {labels.min()}..{labels.max()}")
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_sum = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    log_probs = shifted - log_sum
    n = logits.shape[0]
    loss = -float(log_probs[np.arange(n), labels].mean())
    grad = np.exp(log_probs)
    grad[np.arange(n), labels] -= 1
    return loss, (grad / n).astype(logits.dtype)
