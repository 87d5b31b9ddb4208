"""Runs a Plan. Profiling and energy measurement attach through hooks, not timers in the loop.

Plans for device "cpu" run in an arena (runtime/arena.py): no activation is allocated in steady
state. Other devices keep the plain loop, where each step returns new arrays (or device tensors)
and the frame drops every value after its last reader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from edgecnn.devices import to_host
from edgecnn.errors import EdgeCNNError, GraphError
from edgecnn.runtime.plan import Plan, Step

if TYPE_CHECKING:
    from edgecnn.runtime.arena import FastEntry, MemoryPlan


class StepHook(Protocol):
    """Called around every step of a run (see edgecnn.profiling)."""

    def before(self, step: Step) -> None: ...

    def after(self, step: Step, outputs: tuple[np.ndarray, ...]) -> None: ...


def execute(
    plan: Plan,
    feeds: Mapping[str, np.ndarray],
    wanted: Sequence[str],
    hooks: Sequence[StepHook] = (),
    into: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Run every step and return the ``wanted`` tensors (outputs or intermediates).

    ``into``: C-contiguous arrays of the right type for some wanted tensors; they are written and
    returned (the batch-split runner passes slices of the whole batch's outputs)."""
    if plan.device == "cpu":
        return execute_in_arena(plan, feeds, wanted, hooks, into)
    results = execute_plain(plan, feeds, wanted, hooks)
    for name, array in (into or {}).items():
        np.copyto(array, results[name])
        results[name] = array
    return results


def _failed(step: Step, exc: Exception) -> GraphError:
    """A kernel failing on data it accepted at plan time is a bug: say where."""
    return GraphError(f"node {step.node} failed in kernel '{step.kernel.name}': {exc}")


def execute_plain(
    plan: Plan,
    feeds: Mapping[str, np.ndarray],
    wanted: Sequence[str],
    hooks: Sequence[StepHook] = (),
) -> dict[str, np.ndarray]:
    """Each step returns its outputs; values are dropped after their last reader."""
    frame = plan.new_frame()
    for name, value in feeds.items():
        frame[plan.input_slots[name]] = value
    wanted_slots = {plan.slots[name] for name in wanted if name in plan.slots}
    for step in plan.steps:
        args = [frame[i] if i >= 0 else None for i in step.inputs]
        for hook in hooks:
            hook.before(step)
        try:
            run_device = getattr(step.kernel.run, "run_device", None)
            result = run_device(*args) if run_device else step.kernel.run(*[to_host(a) for a in args])
        except EdgeCNNError:
            raise
        except Exception as exc:
            raise _failed(step, exc) from exc
        outputs = result if isinstance(result, tuple) else (result,)
        for hook in hooks:
            hook.after(step, outputs)
        for slot, value in zip(step.outputs, outputs):
            if slot >= 0:
                frame[slot] = value
        for slot in step.releases:
            if slot not in wanted_slots:
                frame[slot] = None
    feed_ids = {id(v) for v in feeds.values()}
    results = {}
    for name in wanted:
        if name in plan.constants:
            results[name] = plan.constants[name].copy()
            continue
        value = np.asarray(to_host(frame[plan.slots[name]]))
        # Results never alias model constants or the caller's inputs.
        results[name] = value.copy() if id(value) in feed_ids or not value.flags.owndata else value
    return results


def _run_fast(entries: Sequence[FastEntry], frame: list[Any]) -> None:
    """The steps of a run without hooks: what ``execute_in_arena``'s loop does, with every
    per-step decision taken at plan time (arena.fast_entry) and no per-step allocation beyond the
    argument list of steps with more than one input."""
    from edgecnn.runtime.arena import INTO, OPAQUE, VIEW

    step = None
    try:
        for code, run, inputs, output, outputs, overwrites, shape, releases, step in entries:
            if code == INTO:
                if overwrites >= 0:
                    frame[output] = frame[overwrites].reshape(shape)
                target = frame[output] if outputs is None else tuple(frame[s] for s in outputs)
                if len(inputs) == 1 and inputs[0] >= 0:
                    run(target, frame[inputs[0]])
                else:
                    run(target, *[frame[i] if i >= 0 else None for i in inputs])
            elif code == VIEW:
                frame[output] = frame[inputs[0]].reshape(shape)
            elif code == OPAQUE:
                result = run(*[frame[i] if i >= 0 else None for i in inputs])
                values = result if isinstance(result, tuple) else (result,)
                for slot, value in zip(step.outputs, values):
                    if slot >= 0:
                        frame[slot] = value
            for slot in releases:
                frame[slot] = None
    except EdgeCNNError:
        raise
    except Exception as exc:
        assert step is not None
        raise _failed(step, exc) from exc


def _memory_for(plan: Plan, wanted: Sequence[str]) -> MemoryPlan:
    """The plan's MemoryPlan for these requested tensors, cached by their names (no set built per run)."""
    from edgecnn.runtime.arena import memory_plan

    names = tuple(wanted)
    memory = plan.memory_plans.get(names)
    if memory is None:
        wanted_slots = frozenset(plan.slots[name] for name in wanted if name not in plan.constants)
        memory = memory_plan(plan, wanted_slots)
        plan.memory_plans[names] = memory
    return memory  # type: ignore[no-any-return]


def execute_in_arena(
    plan: Plan,
    feeds: Mapping[str, np.ndarray],
    wanted: Sequence[str],
    hooks: Sequence[StepHook] = (),
    into: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Steps write into the views of an arena taken from the plan's pool (returned after the run)."""
    from edgecnn.runtime.arena import INTO, OPAQUE, SKIP, VIEW

    memory = _memory_for(plan, wanted)
    buffers = memory.buffers
    arena = memory.acquire()
    try:
        frame = list(arena.template)
        for name, value in feeds.items():
            frame[plan.input_slots[name]] = value
        given = {}
        for name, array in (into or {}).items():
            slot = plan.slots[name]
            if buffers.kind.get(buffers.root.get(slot, -1)) == "external":
                given[buffers.root[slot]] = array
        for root, shape, dtype in memory.external_types:
            array = given.get(root)
            frame[root] = np.empty(shape, dtype) if array is None else array.reshape(shape)
        for slot, root, at, info in memory.external_slabs:
            raw = frame[root].reshape(-1).view(np.uint8)
            frame[slot] = raw[at : at + info.nbytes].view(info.dtype).reshape(info.shape)
        if not hooks:
            _run_fast(memory.fast, frame)
        for action in memory.actions if hooks else ():
            step = action.step
            for hook in hooks:
                hook.before(step)
            code = action.code
            try:
                if code == INTO:
                    args = [frame[i] if i >= 0 else None for i in step.inputs]
                    if action.overwrites >= 0:
                        frame[step.outputs[0]] = frame[action.overwrites].reshape(action.shape)
                    if len(step.outputs) == 1:
                        action.run(frame[step.outputs[0]], *args)
                    else:
                        action.run(tuple(frame[s] for s in step.outputs), *args)
                elif code == VIEW:
                    frame[step.outputs[0]] = frame[step.inputs[0]].reshape(action.shape)
                elif code == OPAQUE:
                    result = action.run(*[frame[i] if i >= 0 else None for i in step.inputs])
                    outputs = result if isinstance(result, tuple) else (result,)
                    for slot, value in zip(step.outputs, outputs):
                        if slot >= 0:
                            frame[slot] = value
                else:
                    assert code == SKIP
            except EdgeCNNError:
                raise
            except Exception as exc:
                raise _failed(step, exc) from exc
            if hooks:
                outs = tuple(frame[s] for s in step.outputs if s >= 0)
                for hook in hooks:
                    hook.after(step, outs)  # type: ignore[arg-type]
            for slot in action.releases:
                frame[slot] = None
        results: dict[str, np.ndarray] = {}
        claimed: set[int] = set()
        feed_ids = {id(v) for v in feeds.values()}
        for name in wanted:
            if name in plan.constants:
                results[name] = plan.constants[name].copy()
                continue
            slot = plan.slots[name]
            value = np.asarray(frame[slot])
            root = buffers.root.get(slot, slot)
            kind = buffers.kind.get(root)
            own = kind == "external" or (
                kind == "opaque" and value.flags.owndata and id(value) not in feed_ids
            )
            if own and root not in claimed:
                claimed.add(root)  # a buffer of this run's own: hand it over as it is
            else:
                value = value.copy()  # the caller's input, a constant, or shared with another result
            if name in (into or {}) and not np.may_share_memory(value, into[name]):  # type: ignore[index]
                np.copyto(into[name], value)  # type: ignore[index]
                value = into[name]  # type: ignore[index]
            results[name] = value
        return results
    finally:
        memory.release(arena)


def _cpu_threads(n: int) -> Any:
    """kernels.cpu.system.threads.cpu_threads, imported on first use (the reference device never loads numba)
    and then called without an import statement per run."""
    global _cpu_threads
    from edgecnn.kernels.cpu.system.threads import cpu_threads

    _cpu_threads = cpu_threads
    return cpu_threads(n)


_OWN, _COPY, _CONSTANT, _CHECK = range(4)
"""How ArenaRunner returns a result: its own buffer as it is, a copy (the arena, the caller's input,
or a buffer another result already took), a constant's copy, or the ownership test at run time
(outputs of opaque steps, which may or may not alias an input)."""


class ArenaRunner:
    """A CPU plan's hook-free run for fixed requested tensors, with every decision that
    ``execute_in_arena`` takes per run (the memory plan, the thread budget, which results to copy)
    taken once. What Model uses for repeated calls with the same input shapes: on a small model the
    Python around the kernels is a large part of a run, more so on a cold cache (issue 4, T3).
    Gives the same results as ``execute`` (tests/runtime/test_fast_run.py)."""

    def __init__(self, plan: Plan, wanted: Sequence[str], threads: int) -> None:
        if plan.device != "cpu":
            raise ValueError(f"ArenaRunner runs CPU plans, not '{plan.device}'")
        memory = _memory_for(plan, wanted)
        buffers = memory.buffers
        self.plan = plan
        self.wanted = tuple(wanted)
        self.threads = threads
        self._memory = memory
        self._entries = memory.fast
        self._input_slots = tuple(plan.input_slots.items())
        self._externals = tuple(memory.external_types)
        self._slabs = tuple(memory.external_slabs)
        results = []
        claimed: set[int] = set()
        for name in wanted:
            if name in plan.constants:
                results.append((_CONSTANT, -1, plan.constants[name]))
                continue
            slot = plan.slots[name]
            root = buffers.root.get(slot, slot)
            kind = buffers.kind.get(root)
            mode = _COPY
            if root not in claimed and kind in ("external", "opaque"):
                claimed.add(root)
                mode = _OWN if kind == "external" else _CHECK
            results.append((mode, slot, None))
        self._results = tuple(results)

    def run_one(self, x: np.ndarray) -> list[np.ndarray]:
        """The requested tensors, in order, for a one-input plan fed ``x`` (checked by the caller)."""
        with _cpu_threads(self.threads):
            memory = self._memory
            arena = memory.acquire()
            try:
                frame = list(arena.template)
                frame[self._input_slots[0][1]] = x
                return self._finish(frame, (x,))
            finally:
                memory.release(arena)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """{name: value} of the requested tensors; ``feeds`` already checked (Model.check_feeds)."""
        with _cpu_threads(self.threads):
            memory = self._memory
            arena = memory.acquire()
            try:
                frame = list(arena.template)
                for name, slot in self._input_slots:
                    frame[slot] = feeds[name]
                values = self._finish(frame, tuple(feeds.values()))
            finally:
                memory.release(arena)
        return dict(zip(self.wanted, values))

    def _finish(self, frame: list[Any], fed: tuple[np.ndarray, ...]) -> list[np.ndarray]:
        for root, shape, dtype in self._externals:
            frame[root] = np.empty(shape, dtype)
        for slot, root, at, info in self._slabs:
            raw = frame[root].reshape(-1).view(np.uint8)
            frame[slot] = raw[at : at + info.nbytes].view(info.dtype).reshape(info.shape)
        _run_fast(self._entries, frame)
        values = []
        for mode, slot, constant in self._results:
            if mode == _OWN:
                values.append(frame[slot])
            elif mode == _CONSTANT:
                values.append(constant.copy())
            else:
                value = np.asarray(frame[slot])
                if mode == _COPY or not value.flags.owndata or any(value is f for f in fed):
                    value = value.copy()
                values.append(value)
        return values
