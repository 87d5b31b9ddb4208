"""Helpers shared by operator definitions: type-inference building blocks and attribute checks."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import overload

import numpy as np

from edgecnn.ir.graph import Dim, Shape, TensorType


def check(condition: bool, message: str) -> None:
    """Attribute/shape validation; the runtime wraps the ValueError with the node's name."""
    if not condition:
        raise ValueError(message)


MAX_RANK = 64
"""The most dimensions a tensor may have (numpy's own limit)."""


def shown(values: Sequence[object], limit: int = 12) -> str:
    """``values`` as a list for a message, with the middle elided when longer than ``limit``."""
    if len(values) <= limit:
        return str(list(values))
    half = limit // 2
    head = ", ".join(map(str, values[:half]))
    tail = ", ".join(map(str, values[-half:]))
    return f"[{head}, ... {len(values) - 2 * half} more ..., {tail}]"


class AutoPad(enum.Enum):
    """How convolution and pooling derive padding (ONNX ``auto_pad``)."""

    NOTSET = "NOTSET"
    SAME_UPPER = "SAME_UPPER"
    SAME_LOWER = "SAME_LOWER"
    VALID = "VALID"


def first_type(types: Sequence[TensorType | None]) -> TensorType:
    return input_type(types, 0, "the first input")


def input_type(types: Sequence[TensorType | None], index: int, role: str) -> TensorType:
    """The type of a required input; ValueError naming ``role`` when it is missing."""
    t = types[index] if index < len(types) else None
    check(t is not None, f"{role} is required")
    assert t is not None
    return t


def required_types(types: Sequence[TensorType | None], message: str) -> list[TensorType]:
    """Every input's type, for ops whose inputs are all required; ValueError ``message`` if one is missing."""
    present = [t for t in types if t is not None]
    check(len(present) == len(types), message)
    return present


def same_as_first(attrs: object, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    """Inference for ops whose single output has the first input's type (activations...)."""
    return [first_type(types)]


def normalize_axis(axis: int, rank: int) -> int:
    check(-rank <= axis < rank, f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def dim_add(a: Dim, b: Dim) -> Dim:
    return a + b if isinstance(a, int) and isinstance(b, int) else None


def dim_mul(a: Dim, b: Dim) -> Dim:
    """Product of two dimensions; multiplying by 1 keeps a symbolic name."""
    if a == 1:
        return b
    if b == 1:
        return a
    return a * b if isinstance(a, int) and isinstance(b, int) else None


def broadcast_dims(a: Dim, b: Dim) -> Dim:
    """Numpy broadcasting of one dimension, tolerant of symbolic/unknown sizes."""
    if a == 1:
        return b
    if b == 1:
        return a
    if isinstance(a, int) and isinstance(b, int):
        check(a == b, f"cannot broadcast dimensions {a} and {b}")
        return a
    if a == b:
        return a
    if isinstance(a, int):
        return a
    if isinstance(b, int):
        return b
    return None


def broadcast_shapes(*shapes: Shape | None) -> Shape | None:
    known = [s for s in shapes if s is not None]
    if len(known) != len(shapes):
        return None
    rank = max((len(s) for s in known), default=0)
    result: list[Dim] = [1] * rank
    for shape in known:
        padded = (1,) * (rank - len(shape)) + tuple(shape)
        result = [broadcast_dims(x, y) for x, y in zip(result, padded)]
    return tuple(result)


@overload
def concrete_ints(value: np.ndarray) -> list[int]: ...
@overload
def concrete_ints(value: np.ndarray | None) -> list[int] | None: ...
def concrete_ints(value: np.ndarray | None) -> list[int] | None:
    """A constant integer input (shape, axes, pads...) as a Python list, or None if unknown."""
    return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]
