"""Runs a Plan. Profiling and energy measurement attach through hooks, not timers in the loop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from edgecnn.devices import to_host
from edgecnn.errors import EdgeCNNError, GraphError
from edgecnn.runtime.plan import Plan, Step


class StepHook(Protocol):
    """Called around every step of a run (see edgecnn.profiling)."""

    def before(self, step: Step) -> None: ...

    def after(self, step: Step, outputs: tuple[np.ndarray, ...]) -> None: ...


def execute(
    plan: Plan,
    feeds: Mapping[str, np.ndarray],
    wanted: Sequence[str],
    hooks: Sequence[StepHook] = (),
) -> dict[str, np.ndarray]:
    """Run every step and return the ``wanted`` tensors (outputs or intermediates)."""
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
        except Exception as exc:  # a kernel failing on data it accepted at plan time is a bug
            raise GraphError(f"node {step.node} failed in kernel '{step.kernel.name}': {exc}") from exc
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
