"""Kernel registry: ``@register_kernel(op, backend=..., when=..., priority=...)``.

A kernel is registered as a *factory*: ``factory(node, input_types, input_values)`` is called
once per plan (pack weights, pick an algorithm) and returns the callable that runs the step,
``fn(*inputs) -> ndarray | tuple[ndarray, ...]``. The op's reference kernel is the fallback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.ops.registry import get_op

StepFn = Callable[..., Any]
KernelFactory = Callable[[Node, Sequence["TensorType | None"], Sequence["np.ndarray | None"]], StepFn]
KernelPredicate = Callable[[Node, Sequence["TensorType | None"], Sequence["np.ndarray | None"]], bool]


@dataclass(frozen=True)
class KernelEntry:
    op: str
    backend: str
    name: str
    factory: KernelFactory
    when: KernelPredicate | None
    priority: int


@dataclass(frozen=True)
class KernelChoice:
    """The kernel chosen for one step: its name (shown by profiling) and the prepared callable."""

    name: str
    run: StepFn


_KERNELS: dict[tuple[str, str], list[KernelEntry]] = {}


def register_kernel(
    op: str,
    *,
    backend: str = "cpu",
    when: KernelPredicate | None = None,
    priority: int = 0,
    name: str | None = None,
) -> Callable[[KernelFactory], KernelFactory]:
    """Register a kernel factory for ``op`` on ``backend``; higher priority is tried first."""

    def decorate(factory: KernelFactory) -> KernelFactory:
        entry = KernelEntry(op, backend, name or factory.__name__, factory, when, priority)
        entries = _KERNELS.setdefault((op, backend), [])
        entries.append(entry)
        entries.sort(key=lambda e: -e.priority)
        return factory

    return decorate


def select_kernel(
    node: Node,
    input_types: Sequence[TensorType | None],
    input_values: Sequence[np.ndarray | None],
    backend: str = "cpu",
) -> KernelChoice:
    """Best registered kernel for the node on ``backend`` (a device name: "cpu", "opencl:1",
    "reference"); the reference kernel otherwise. Factories learn the device from
    ``edgecnn.devices.active_device()``."""
    from edgecnn.devices import parse_device, using_device

    spec = parse_device(backend)
    if spec.kind == "cpu":
        import edgecnn.kernels.cpu  # registers the compiled kernels on first use
    elif spec.kind == "opencl":
        import edgecnn.kernels.opencl  # noqa: F401
    if spec.kind != "reference":
        with using_device(spec):
            for entry in _KERNELS.get((node.op, spec.kind), ()):
                if entry.when is None or entry.when(node, input_types, input_values):
                    return KernelChoice(entry.name, entry.factory(node, input_types, input_values))
    opdef = get_op(node.op)
    return KernelChoice("reference", functools.partial(opdef.reference, node.attrs))
