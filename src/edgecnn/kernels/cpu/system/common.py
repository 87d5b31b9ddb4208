"""What every compiled CPU kernel's predicate and factory share: type tests on the planned
inputs, and a per-thread scratch buffer that kernels reuse instead of allocating per call."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType

_scratch = threading.local()


def is_float32(t: TensorType | None, rank: int | None = None) -> bool:
    """A float32 tensor whose shape is fully known, non-empty and (if given) of ``rank``."""
    if t is None or t.dtype != "float32" or not t.is_concrete:
        return False
    shape = t.shape
    assert shape is not None
    return (rank is None or len(shape) == rank) and all(isinstance(d, int) and d > 0 for d in shape)


def shape_of(t: TensorType | None) -> tuple[int, ...]:
    """The concrete shape of a type the predicate accepted."""
    assert t is not None
    return t.dims


def optional_input(node: Node, index: int) -> bool:
    """Whether the node has a (non-omitted) input at ``index``."""
    return len(node.inputs) > index and bool(node.inputs[index])


def constant_float32(
    node: Node, values: Sequence[np.ndarray | None], index: int, *, optional: bool = False
) -> bool:
    """Input ``index`` is a float32 constant known at plan time (or omitted, if ``optional``)."""
    if not optional_input(node, index):
        return optional
    value = values[index] if index < len(values) else None
    return value is not None and value.dtype == np.float32


def single_output(node: Node) -> bool:
    return len(node.outputs) == 1


def worker_scratch(workers: int, size: int) -> np.ndarray:
    """(workers, capacity) float32, C-contiguous, capacity >= ``size``: row w is worker w's own
    scratch, owned by the calling thread like ``scratch``'s buffer but apart from it.

    Why: each row starts at the same address in every layer, so worker w (the same core from one
    parallel region to the next) writes only lines its own core wrote last. Carving one shared
    buffer into ``size``-float shares instead moves the boundary from layer to layer, and every
    write past it first takes the line from the other core's cache, which on some machines is slow
    for minutes at a time."""
    buffer: np.ndarray | None = getattr(_scratch, "workers", None)
    if buffer is None or buffer.shape[0] < workers or buffer.shape[1] < size:
        rows = max(workers, buffer.shape[0] if buffer is not None else 0)
        capacity = max(size, buffer.shape[1] if buffer is not None else 0)
        buffer = np.empty((rows, capacity), dtype=np.float32)
        _scratch.workers = buffer
    return buffer[:workers]


def scratch(size: int) -> np.ndarray:
    """A float32 buffer of ``size`` elements, owned by the calling thread and shared by every kernel
    it runs (kernels of one run execute one after another, and none keeps it past its call)."""
    buffer: np.ndarray | None = getattr(_scratch, "buffer", None)
    if buffer is None or buffer.size < size:
        buffer = np.empty(size, dtype=np.float32)
        _scratch.buffer = buffer
    return buffer[:size]
