"""The operator registry: each op is defined once with its attributes, type inference and
numpy reference kernel. Fast kernels (edgecnn.kernels) only make ops faster."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgecnn.ir.graph import TensorType

InferFn = Callable[[Any, Sequence["TensorType | None"], Sequence["np.ndarray | None"]], list[TensorType]]
"""infer(attrs, input_types, input_values) -> output types.

``input_types[i]`` is None for an omitted optional input; ``input_values[i]`` holds the
value of inputs that are known constants (initializers or folded), else None.
"""

ReferenceFn = Callable[..., Any]
"""reference(attrs, *inputs) -> ndarray or tuple of ndarrays (omitted optional inputs are None)."""


@dataclass(frozen=True)
class NoAttrs:
    """Attributes of an operator that has none."""


@dataclass(frozen=True)
class OpDef:
    """Everything edgecnn knows about the meaning of one operator."""

    name: str
    attrs_type: type
    infer: InferFn
    reference: ReferenceFn
    min_inputs: int
    max_inputs: int | None  # None: variadic
    num_outputs: tuple[int, int]  # (min, max) outputs
    foldable: bool  # may be evaluated at plan time when all inputs are constants
    shape_only: bool = False  # reads only its inputs' shapes: folded once they are concrete

    def run_reference(self, attrs: Any, inputs: Sequence[np.ndarray | None]) -> tuple[np.ndarray, ...]:
        result = self.reference(attrs, *inputs)
        return result if isinstance(result, tuple) else (result,)


_REGISTRY: dict[str, OpDef] = {}


def register_op(
    name: str,
    *,
    infer: InferFn,
    attrs: type = NoAttrs,
    inputs: int | tuple[int, int | None] = 1,
    outputs: int | tuple[int, int] = 1,
    foldable: bool = True,
    shape_only: bool = False,
) -> Callable[[ReferenceFn], ReferenceFn]:
    """Register ``name``; the decorated function is its numpy reference kernel."""
    min_in, max_in = (inputs, inputs) if isinstance(inputs, int) else inputs
    num_out = (outputs, outputs) if isinstance(outputs, int) else outputs

    def decorate(reference: ReferenceFn) -> ReferenceFn:
        if name in _REGISTRY:
            raise RuntimeError(f"operator {name} registered twice")
        _REGISTRY[name] = OpDef(name, attrs, infer, reference, min_in, max_in, num_out, foldable, shape_only)
        return reference

    return decorate


def get_op(name: str) -> OpDef:
    _ensure_loaded()
    return _REGISTRY[name]


def known_ops() -> frozenset[str]:
    _ensure_loaded()
    return frozenset(_REGISTRY)


def _ensure_loaded() -> None:
    import edgecnn.ops  # noqa: F401  (importing the package registers every family)
