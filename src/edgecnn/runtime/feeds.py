"""Example inputs for a model: concrete shapes for its (possibly symbolic) input specs and
random arrays of those shapes — what `edgecnn info`, `edgecnn time` and the benchmarks feed."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from edgecnn.errors import InputError
from edgecnn.ir.graph import TensorSpec, concrete_dims, format_shape
from edgecnn.limits import MemoryBudget


def concrete_shape(
    spec: TensorSpec, batch: int | None = None, shape: Sequence[int] | None = None
) -> tuple[int, ...]:
    """The input's shape with every dimension known.

    ``shape`` replaces the declared shape outright; otherwise a symbolic or unknown first
    dimension becomes ``batch`` (default 1), ``batch`` overrides a fixed first dimension, and any
    other unknown dimension is an error that asks for ``shape``."""
    if shape is not None:
        if spec.shape is not None and len(shape) != len(spec.shape):
            raise InputError(
                f"input '{spec.name}': shape {list(shape)} has rank {len(shape)}, "
                f"the model declares {format_shape(spec.shape)}"
            )
        return tuple(int(d) for d in shape)
    if spec.shape is None:
        raise InputError(f"input '{spec.name}' has an unknown shape; give one (e.g. --shape 1x3x224x224)")
    dims = list(spec.shape)
    if dims and (batch is not None or not isinstance(dims[0], int)):
        dims[0] = 1 if batch is None else batch
    unknown = [axis for axis, d in enumerate(dims) if not isinstance(d, int)]
    if unknown:
        raise InputError(
            f"input '{spec.name}' has symbolic dimensions {format_shape(spec.shape)}; "
            f"give a concrete shape (e.g. --shape {'x'.join(str(d) if isinstance(d, int) else '224' for d in dims)})"
        )
    return concrete_dims(tuple(dims))


def random_feeds(
    specs: Sequence[TensorSpec],
    batch: int | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 0,
    budget: MemoryBudget | None = None,
) -> dict[str, np.ndarray]:
    """Standard-normal floats (zeros for integer and boolean inputs) of each input's concrete shape,
    all shapes checked against ``budget`` (default ``MemoryBudget.default()``) before any is made."""
    rng = np.random.default_rng(seed)
    chosen = {spec.name: concrete_shape(spec, batch, (shapes or {}).get(spec.name)) for spec in specs}
    tally = (budget or MemoryBudget.default()).tally("example inputs", InputError)
    for spec in specs:  # floats are drawn as float64 first
        itemsize = max(np.dtype(spec.dtype).itemsize, 8)
        tally.add(math.prod(chosen[spec.name]) * itemsize, f"input '{spec.name}' {list(chosen[spec.name])}")
    feeds = {}
    for spec in specs:
        shape = chosen[spec.name]
        if np.issubdtype(np.dtype(spec.dtype), np.floating):
            feeds[spec.name] = rng.standard_normal(shape).astype(spec.dtype)
        else:
            feeds[spec.name] = np.zeros(shape, dtype=spec.dtype)
    return feeds
