"""Activation functions and softmax."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgecnn.ops.common import same_as_first
from edgecnn.ops.registry import NoAttrs, register_op


@register_op("Relu", infer=same_as_first)
def relu(attrs: NoAttrs, x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.zeros((), x.dtype))


@dataclass(frozen=True)
class LeakyReluAttrs:
    alpha: float = 0.01


@register_op("LeakyRelu", attrs=LeakyReluAttrs, infer=same_as_first)
def leaky_relu(attrs: LeakyReluAttrs, x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, x, x * x.dtype.type(attrs.alpha))
