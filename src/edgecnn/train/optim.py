"""SGD with momentum and weight decay, and the learning-rate schedules (constant, step, cosine)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from edgecnn.errors import InputError

SCHEDULES = ("constant", "step", "cosine")


@dataclass(frozen=True)
class Schedule:
    """Learning rate at a (fractional) epoch: ``step`` multiplies by ``gamma`` every ``step_size``
    epochs; ``cosine`` anneals from ``lr`` to ``min_lr`` over ``epochs``."""

    kind: str = "step"
    lr: float = 0.05
    step_size: int = 5
    gamma: float = 0.2
    epochs: int = 10
    min_lr: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULES:
            raise InputError(
                f"unknown learning-rate schedule {self.kind!r}; use one of {', '.join(SCHEDULES)}"
            )
        if self.lr <= 0 or self.step_size < 1 or not 0 < self.gamma <= 1 or self.epochs < 1:
            raise InputError(
                f"schedule needs lr > 0, step_size >= 1, 0 < gamma <= 1 and epochs >= 1, got {self}"
            )

    def at(self, epoch: float) -> float:
        if self.kind == "constant":
            return self.lr
        if self.kind == "step":
            return self.lr * self.gamma ** int(epoch // self.step_size)
        progress = min(max(epoch / self.epochs, 0.0), 1.0)
        return self.min_lr + (self.lr - self.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


class SGD:
    """v <- momentum * v + (g + weight_decay * w);  w <- w - lr * v.

    Weight decay applies to the names in ``decayed`` (layer weights, not biases or BatchNorm
    parameters). Masked entries (pruned weights) get no gradient, no decay and no velocity, so
    they stay exactly zero."""

    def __init__(self, momentum: float = 0.9, weight_decay: float = 0.0, decayed: Iterable[str] = ()) -> None:
        if not 0.0 <= momentum < 1.0 or weight_decay < 0.0:
            raise InputError(
                f"SGD needs 0 <= momentum < 1 and weight_decay >= 0, got {momentum}, {weight_decay}"
            )
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.decayed = frozenset(decayed)
        self.velocity: dict[str, np.ndarray] = {}

    def step(
        self,
        params: dict[str, np.ndarray],
        grads: Mapping[str, np.ndarray],
        lr: float,
        masks: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        """Update ``params`` in place."""
        for name, grad in grads.items():
            w = params[name]
            g = (
                grad + w.dtype.type(self.weight_decay) * w
                if name in self.decayed and self.weight_decay
                else grad
            )
            v = self.velocity.get(name)
            v = g.astype(w.dtype) if v is None else w.dtype.type(self.momentum) * v + g
            mask = masks.get(name) if masks else None
            if mask is not None:
                v = np.where(mask, v, np.zeros((), w.dtype))
            self.velocity[name] = v
            w -= w.dtype.type(lr) * v
            if mask is not None:
                w[~mask] = 0
