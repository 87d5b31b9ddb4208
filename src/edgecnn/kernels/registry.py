"""Kernel registry: ``@register_kernel(op, backend=..., when=..., priority=...)``.

A kernel is registered as a *factory*: ``factory(node, input_types, input_values)`` is called
once per plan (pack weights, pick an algorithm) and returns the callable that runs the step,
``fn(*inputs) -> ndarray | tuple[ndarray, ...]``. The op's reference kernel is the fallback.

Write-into protocol (arena execution, edgecnn.runtime.arena): a CPU step callable may also expose
``fn.run_into(out, *inputs) -> None``, writing its result into ``out`` instead of allocating it.
``out`` is a C-contiguous array of exactly the planned output type (dtype and shape), often a view
into the run's arena; a tuple of such arrays for a step with several outputs. It never overlaps an
input unless the callable sets ``fn.in_place = True``: then ``out`` may *be* input 0 (same memory,
same type), and the kernel must read every element before writing it. ``run_into`` must neither
keep ``out`` or the inputs past the call nor return a view of them; per-call temporaries belong in
``kernels.cpu.common.scratch`` (per thread, reused), so that a steady-state run allocates nothing.
Steps without ``run_into`` still work: their results are kept as they are, outside the arena.
OpenCL steps expose ``fn.run_device`` instead (device-resident tensors).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
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
    applies: KernelPredicate | None = None  # can run the node at all (default: ``when``); for tuning

    def can_run(
        self, node: Node, input_types: Sequence[TensorType | None], input_values: Sequence[np.ndarray | None]
    ) -> bool:
        """Whether this kernel is a candidate for the node, whether or not its heuristic prefers it."""
        test = self.applies if self.applies is not None else self.when
        return test is None or test(node, input_types, input_values)


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
    applies: KernelPredicate | None = None,
) -> Callable[[KernelFactory], KernelFactory]:
    """Register a kernel factory for ``op`` on ``backend``; higher priority is tried first.

    ``when`` is the heuristic (the kernel is chosen if it holds); ``applies``, if given, is wider:
    where the kernel can run at all, so that `edgecnn tune` may measure it and pick it."""

    def decorate(factory: KernelFactory) -> KernelFactory:
        entry = KernelEntry(op, backend, name or factory.__name__, factory, when, priority, applies)
        entries = _KERNELS.setdefault((op, backend), [])
        entries[:] = [e for e in entries if not _same_kernel(e, entry)]  # a module imported again
        entries.append(entry)
        entries.sort(key=lambda e: -e.priority)
        return factory

    return decorate


def _same_kernel(a: KernelEntry, b: KernelEntry) -> bool:
    """The same name registered by the same factory (by module and qualified name): a re-import
    replaces its kernels instead of listing them twice."""
    return a.name == b.name and _qualified(a.factory) == _qualified(b.factory)


def _qualified(factory: KernelFactory) -> tuple[str, str]:
    return getattr(factory, "__module__", ""), getattr(factory, "__qualname__", repr(factory))


@contextmanager
def scoped_registrations() -> Iterator[None]:
    """Kernels registered inside the block are unregistered when it ends: tests of a kernel module
    that is not (yet) imported by its backend package must not change other tests' kernel choices."""
    saved = {key: list(entries) for key, entries in _KERNELS.items()}
    try:
        yield
    finally:
        _KERNELS.clear()
        _KERNELS.update(saved)


def select_kernel(
    node: Node,
    input_types: Sequence[TensorType | None],
    input_values: Sequence[np.ndarray | None],
    backend: str = "cpu",
    threads: int | None = None,
) -> KernelChoice:
    """Best registered kernel for the node on ``backend`` (a device name: "cpu", "opencl:1",
    "reference"); the reference kernel otherwise. Factories learn the device from
    ``edgecnn.devices.active_device()``.

    "Best" is the kernel `edgecnn tune` measured fastest for this layer and ``threads`` on this
    machine (default threads: EDGECNN_NUM_THREADS, else all cores) if the tuning cache has it,
    else the first, by priority, whose heuristic accepts the node."""
    from edgecnn.devices import parse_device, using_device

    spec = parse_device(backend)
    if spec.kind == "cpu":
        import edgecnn.kernels.cpu  # registers the compiled kernels on first use
    elif spec.kind == "opencl":
        import edgecnn.kernels.opencl
    elif spec.kind == "cuda":
        import edgecnn.kernels.cuda  # noqa: F401
    if spec.kind != "reference":
        entries = _KERNELS.get((node.op, spec.kind), ())
        with using_device(spec):
            tuned = _tuned_entry(entries, node, input_types, input_values, spec.kind, threads)
            if tuned is not None:
                return KernelChoice(tuned.name, tuned.factory(node, input_types, input_values))
            for entry in entries:
                if entry.when is None or entry.when(node, input_types, input_values):
                    return KernelChoice(entry.name, entry.factory(node, input_types, input_values))
    opdef = get_op(node.op)
    return KernelChoice("reference", functools.partial(opdef.reference, node.attrs))


def candidate_kernels(
    node: Node,
    input_types: Sequence[TensorType | None],
    input_values: Sequence[np.ndarray | None],
    device_kind: str = "cpu",
) -> list[KernelEntry]:
    """Every registered kernel that can run the node, by priority (what `edgecnn tune` measures)."""
    return [e for e in _KERNELS.get((node.op, device_kind), ()) if e.can_run(node, input_types, input_values)]


def _tuned_entry(
    entries: Sequence[KernelEntry],
    node: Node,
    input_types: Sequence[TensorType | None],
    input_values: Sequence[np.ndarray | None],
    device_kind: str,
    threads: int | None,
) -> KernelEntry | None:
    """The registered entry the tuning cache names for this layer, if it can run the node."""
    if len(entries) < 2:
        return None
    from edgecnn.kernels.tuning import tuned_kernel

    if threads is None:
        from edgecnn.runtime.options import RuntimeOptions, available_cores

        try:
            threads = RuntimeOptions.resolve().threads
        except ValueError:  # a bad EDGECNN_NUM_THREADS is reported where the options are resolved
            threads = available_cores()
    name = tuned_kernel(node, input_types, input_values, device_kind, threads)
    if name is None:
        return None
    for entry in entries:
        if entry.name == name and entry.can_run(node, input_types, input_values):
            return entry
    return None
