"""Kernel registry: ``@register_kernel(op, backend=..., when=..., priority=...)``.

A kernel is registered as a *factory*: ``factory(node, input_types, input_values)`` is called
once per plan (pack weights, pick an algorithm) and returns the callable that runs the step,
``fn(*inputs) -> ndarray | tuple[ndarray, ...]``. The op's reference kernel is the fallback.

Write-into protocol (arena execution, edgecnn.runtime.arena): a CPU step callable may also expose
``fn.run_into(out, *inputs) -> None``, writing its result into ``out`` instead of allocating it.
``out`` is a C-contiguous array of exactly the planned output type (dtype and shape), often a view
into the run's arena; a tuple of such arrays for a step with several outputs. It never overlaps an
input unless the callable sets ``fn.in_place = True``: then ``out`` may *be* input 0 (same memory,
same type), and the kernel must read every element before writing it; a tuple of input positions
(``fn.in_place = (3,)``) names other inputs that ``out`` may be, on the same terms. ``run_into`` must neither
keep ``out`` or the inputs past the call nor return a view of them; per-call temporaries belong in
``kernels.cpu.system.common.scratch`` (per thread, reused), so that a steady-state run allocates nothing.
Steps without ``run_into`` still work: their results are kept as they are, outside the arena.
OpenCL steps expose ``fn.run_device`` instead (device-resident tensors).
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
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
_PENDING: dict[tuple[str, str], list[str]] = {}  # (op, backend): declared kernel modules not imported yet
_pending_lock = threading.RLock()


def register_module(module: str, ops: Iterable[str], *, backend: str = "cpu") -> None:
    """Declare that importing ``module`` registers ``backend`` kernels for ``ops``; it is imported
    the first time a node of one of those ops is planned (or its candidates listed), not before.

    Why: importing every kernel module up front costs start-up time for operators a model does
    not have (int8, LRN...). The ops listed must cover every op the module registers kernels for,
    or those kernels stay unknown until another listed op brings the module in."""
    with _pending_lock:
        for op in ops:
            modules = _PENDING.setdefault((op, backend), [])
            if module not in modules:
                modules.append(module)


def _import_backend(backend: str) -> None:
    """Import the backend's kernel package, which registers (or declares) its kernels."""
    if backend == "cpu":
        import edgecnn.kernels.cpu  # declares the compiled kernels' modules, imported per op on first use
    elif backend == "opencl":
        import edgecnn.kernels.opencl
    elif backend == "cuda":
        import edgecnn.kernels.cuda  # noqa: F401


def _entries(op: str, backend: str) -> Sequence[KernelEntry]:
    """The kernels registered for ``op`` on ``backend``, importing the modules declared for it first.

    The lock is held while they import, so that a second thread planning the same op waits for
    the kernels instead of falling back to the reference; a module is forgotten only once its
    import succeeded (a failed import is retried, and raises again, next time)."""
    _import_backend(backend)
    key = (op, backend)
    if key in _PENDING:
        with _pending_lock:
            modules = _PENDING.get(key, [])
            for module in list(modules):  # a copy: an import that plans this op itself removes entries too
                importlib.import_module(module)
                if module in modules:
                    modules.remove(module)
            _PENDING.pop(key, None)
    return _KERNELS.get(key, ())


def import_pending(backend: str | None = None) -> None:
    """Import ``backend``'s kernel package and every kernel module it declared, now (default: the
    CPU package, then every backend's declared modules): for code that reads or edits the whole
    registry rather than asking for one op's kernels."""
    _import_backend(backend or "cpu")
    with _pending_lock:
        for op, kind in list(_PENDING):
            if backend is None or kind == backend:
                _entries(op, kind)


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
    that is not (yet) imported by its backend package must not change other tests' kernel choices.

    Declared modules (``register_module``) are imported first: one imported inside the block
    would have its kernels unregistered at the end but stay imported, so they would be lost.
    Declarations made inside the block are forgotten at its end too."""
    import_pending()
    saved = {key: list(entries) for key, entries in _KERNELS.items()}
    with _pending_lock:
        saved_pending = {key: list(modules) for key, modules in _PENDING.items()}
    try:
        yield
    finally:
        _KERNELS.clear()
        _KERNELS.update(saved)
        with _pending_lock:
            _PENDING.clear()
            _PENDING.update(saved_pending)


_selection_threads: ContextVar[int | None] = ContextVar("edgecnn_selection_threads", default=None)
"""The thread count of the selection under way, for factories that select an inner kernel."""


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
    machine if the tuning cache has it, else the first, in selection order, whose heuristic accepts
    the node. ``threads`` None: those of the selection this one runs inside (a factory choosing an
    inner kernel), else the tuning cache is not consulted."""
    from edgecnn.devices import parse_device, using_device

    spec = parse_device(backend)
    if spec.kind != "reference":
        entries = _entries(node.op, spec.kind)
        if threads is None:
            threads = _selection_threads.get()
        token = _selection_threads.set(threads)
        try:
            with using_device(spec):
                tuned = _tuned_entry(entries, node, input_types, input_values, spec.kind, threads)
                if tuned is not None:
                    return KernelChoice(tuned.name, tuned.factory(node, input_types, input_values))
                for entry in entries:
                    if entry.when is None or entry.when(node, input_types, input_values):
                        return KernelChoice(entry.name, entry.factory(node, input_types, input_values))
        finally:
            _selection_threads.reset(token)
    opdef = get_op(node.op)
    return KernelChoice("reference", functools.partial(opdef.reference, node.attrs))


def candidate_kernels(
    node: Node,
    input_types: Sequence[TensorType | None],
    input_values: Sequence[np.ndarray | None],
    device_kind: str = "cpu",
) -> list[KernelEntry]:
    """Every registered kernel that can run the node, by priority (what `edgecnn tune` measures)."""
    return [e for e in _entries(node.op, device_kind) if e.can_run(node, input_types, input_values)]


def _tuned_entry(
    entries: Sequence[KernelEntry],
    node: Node,
    input_types: Sequence[TensorType | None],
    input_values: Sequence[np.ndarray | None],
    device_kind: str,
    threads: int | None,
) -> KernelEntry | None:
    """The registered entry the tuning cache names for this layer, if it can run the node."""
    if len(entries) < 2 or threads is None:
        return None
    from edgecnn.kernels.tuning import tuned_kernel

    name = tuned_kernel(node, input_types, input_values, device_kind, threads)
    if name is None:
        return None
    for entry in entries:
        if entry.name == name and entry.can_run(node, input_types, input_values):
            return entry
    return None
