"""Runs a Plan: one step loop for every device and every caller.

Everything a run needs was decided by ``build_plan`` (runtime/plan.py): the run only takes an arena
from the plan's pool, walks the steps' prepared actions and hands the requested tensors back.
Profiling and energy measurement attach through hooks called around each step; partitioned
execution (edgecnn.hetero) runs its own kernels through this same loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from edgecnn.devices import to_host
from edgecnn.errors import EdgeCNNError, GraphError
from edgecnn.runtime.arena import CONSTANT, COPY, HOST, INTO, OPAQUE, OWN, VIEW, FastEntry, MemoryPlan
from edgecnn.runtime.batch import run_split, threading_layer_is_safe
from edgecnn.runtime.plan import Plan, Step


class StepHook(Protocol):
    """Called around every step of a run (see edgecnn.profiling)."""

    def before(self, step: Step) -> None: ...

    def after(self, step: Step, outputs: tuple[Any, ...]) -> None: ...


def execute(
    plan: Plan,
    feeds: Mapping[str, np.ndarray],
    hooks: Sequence[StepHook] = (),
    threads: int | None = None,
) -> dict[str, np.ndarray]:
    """{name: value} of the plan's requested tensors; ``feeds`` already checked (Model.check_feeds)."""
    inputs = tuple(feeds[name] for name in plan.program.input_slots)
    return dict(zip(plan.wanted, run_plan(plan, inputs, hooks, threads)))


def run_plan(
    plan: Plan, inputs: Sequence[np.ndarray], hooks: Sequence[StepHook] = (), threads: int | None = None
) -> list[np.ndarray]:
    """The requested tensors, in ``plan.wanted`` order, for checked ``inputs`` in the plan's input
    order. CPU runs hold the plan's thread budget, or ``threads`` where fewer (a caller running
    several inputs side by side, each on one thread), and split the batch where the plan says so
    and has its whole budget."""
    if not plan.memory.in_arena:
        return run_steps(plan.memory, inputs, hooks)
    budget = plan.threads if threads is None else min(threads, plan.threads)
    with _cpu_threads(budget):
        if plan.split is not None and budget == plan.threads and not hooks and threading_layer_is_safe():
            return _run_split(plan, inputs)
        return run_steps(plan.memory, inputs, hooks)


def run_steps(
    memory: MemoryPlan,
    inputs: Sequence[np.ndarray],
    hooks: Sequence[StepHook] = (),
    into: Sequence[np.ndarray | None] | None = None,
) -> list[np.ndarray]:
    """The step loop. ``into``: per requested tensor, None or a C-contiguous array of its type to
    write it into (the batch-split runner passes slices of the whole batch's outputs)."""
    arena = memory.acquire()
    try:
        frame: list[Any] = list(arena.template)
        for slot, value in zip(memory.input_slots, inputs):
            frame[slot] = value
        given = _given_buffers(memory, into) if into is not None else None
        for root, shape, dtype in memory.external_types:
            array = None if given is None else given.get(root)
            frame[root] = np.empty(shape, dtype) if array is None else array.reshape(shape)
        for slot, root, at, info in memory.external_slabs:
            raw = frame[root].reshape(-1).view(np.uint8)
            frame[slot] = raw[at : at + info.nbytes].view(info.dtype).reshape(info.shape)
        _walk(memory.entries, frame, hooks)
        values = _results(memory, frame, inputs)
    finally:
        memory.release(arena)
    if into is not None:
        for index, (value, target) in enumerate(zip(values, into)):
            if target is not None and not np.may_share_memory(value, target):
                np.copyto(target, value)
                values[index] = target
    return values


def _walk(entries: Sequence[FastEntry], frame: list[Any], hooks: Sequence[StepHook]) -> None:
    """Every step's action, with every per-step decision taken at plan time (arena.MemoryPlan)."""
    step = None
    try:
        for code, run, inputs, output, outputs, overwrites, shape, releases, step in entries:
            if hooks:
                for hook in hooks:
                    hook.before(step)
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
            if hooks:
                produced = tuple(frame[s] for s in step.outputs if s >= 0)
                for hook in hooks:
                    hook.after(step, produced)
            for slot in releases:
                frame[slot] = None
    except EdgeCNNError:
        raise
    except Exception as exc:
        assert step is not None
        raise GraphError(f"node {step.node} failed in kernel '{step.kernel.name}': {exc}") from exc


def _given_buffers(memory: MemoryPlan, into: Sequence[np.ndarray | None]) -> dict[int, np.ndarray]:
    """The caller's arrays that can be the run's own result buffers, by buffer root."""
    buffers = memory.buffers
    given = {}
    for (_, slot, _), array in zip(memory.results, into):
        if array is not None and slot >= 0 and buffers.kind.get(buffers.root.get(slot, -1)) == "external":
            given[buffers.root[slot]] = array
    return given


def _results(memory: MemoryPlan, frame: list[Any], fed: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The requested tensors, never aliasing the arena, the caller's inputs or the model's constants."""
    values = []
    for mode, slot, constant in memory.results:
        if mode == OWN:
            values.append(frame[slot])
        elif mode == CONSTANT:
            assert constant is not None
            values.append(constant.copy())
        else:
            value = np.asarray(to_host(frame[slot]) if mode == HOST else frame[slot])
            if mode == COPY or not value.flags.owndata or any(value is f for f in fed):
                value = value.copy()
            values.append(value)
    return values


def _run_split(plan: Plan, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The batch in slices run side by side (runtime/batch.py), each writing its rows of the outputs."""
    split = plan.split
    assert split is not None
    names = tuple(plan.program.input_slots)
    types = plan.program.types
    shapes = {name: (types[name].dims, types[name].dtype) for name in plan.wanted}

    def run_slice(slice_feeds: dict[str, np.ndarray], into: dict[str, np.ndarray]) -> None:
        size = next(iter(slice_feeds.values())).shape[0]
        memory = split.plans[size].memory
        run_steps(memory, [slice_feeds[n] for n in names], (), [into.get(n) for n in plan.wanted])

    results = run_split(dict(zip(names, inputs)), split.parts, shapes, run_slice)
    return [results[name] for name in plan.wanted]


def _cpu_threads(n: int) -> Any:
    """kernels.cpu.system.threads.cpu_threads, imported on first use (the reference device never
    loads numba) and then called without an import statement per run."""
    global _cpu_threads
    from edgecnn.kernels.cpu.system.threads import cpu_threads

    _cpu_threads = cpu_threads
    return cpu_threads(n)
