"""Backward passes, one entry per operator: a training forward that keeps what backward needs, and a
backward that maps the output gradient to input gradients. The meaning of each op stays in
edgecnn.ops; this registry only adds derivatives."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Context:
    """What a training forward may need besides its inputs: the mode and seeded randomness."""

    training: bool = True
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    bn_momentum: float = 0.9  # running = momentum * running + (1 - momentum) * batch statistic


@dataclass
class Forward:
    """Outputs of one node, the cache its backward reads, and new values for state inputs
    (BatchNormalization's running statistics), keyed by input index."""

    outputs: tuple[np.ndarray, ...]
    cache: Any = None
    updates: dict[int, np.ndarray] = field(default_factory=dict)


ForwardFn = Callable[[Any, Sequence["np.ndarray | None"], Context], Forward]
BackwardFn = Callable[[Any, Any, np.ndarray, Sequence[bool]], Sequence["np.ndarray | None"]]
"""backward(attrs, cache, grad_of_first_output, needed) -> one gradient (or None) per input;
``needed[i]`` is False when nobody wants input i's gradient, so it may be skipped."""


@dataclass(frozen=True)
class GradDef:
    op: str
    forward: ForwardFn
    backward: BackwardFn
    differentiable: tuple[int, ...]  # input slots that carry gradients (data and parameters)


_GRADS: dict[str, GradDef] = {}


def register_grad(
    op: str, forward: ForwardFn, backward: BackwardFn, differentiable: tuple[int, ...] = (0,)
) -> None:
    """Register the training forward and the backward of ``op``."""
    if op in _GRADS:
        raise RuntimeError(f"gradient of {op} registered twice")
    _GRADS[op] = GradDef(op, forward, backward, differentiable)


def get_grad(op: str) -> GradDef | None:
    _ensure_loaded()
    return _GRADS.get(op)


def trainable_ops() -> frozenset[str]:
    _ensure_loaded()
    return frozenset(_GRADS)


def _ensure_loaded() -> None:
    from edgecnn.train import layers  # noqa: F401  (importing the package registers every family)


def unbroadcast(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``grad`` down to ``shape`` (the inverse of numpy broadcasting)."""
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad.reshape(shape)
