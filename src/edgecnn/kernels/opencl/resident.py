"""Running a plan with activations resident on the OpenCL device: steps that offer ``run_device``
pass DeviceArrays to each other, other steps get host copies, and only the results come back.

This is :func:`edgecnn.runtime.executor.execute` with two changes, kept here until the executor
makes them (it then needs only :func:`edgecnn.devices.to_host`):
  1. a step whose kernel has ``run_device`` is called through it; any other step's arguments go
     through ``to_host`` first;
  2. results are read with ``np.asarray`` (a DeviceTensor copies itself to the host).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from edgecnn.devices import to_host
from edgecnn.errors import EdgeCNNError, GraphError
from edgecnn.runtime.executor import StepHook
from edgecnn.runtime.plan import Plan


def execute_resident(
    plan: Plan,
    feeds: Mapping[str, np.ndarray],
    wanted: Sequence[str],
    hooks: Sequence[StepHook] = (),
) -> dict[str, np.ndarray]:
    """Run every step of ``plan``, keeping OpenCL results on the device, and return ``wanted``."""
    frame: list[object] = list(plan.new_frame())
    for name, value in feeds.items():
        frame[plan.input_slots[name]] = value
    wanted_slots = {plan.slots[name] for name in wanted if name in plan.slots}
    for step in plan.steps:
        args = [frame[i] if i >= 0 else None for i in step.inputs]
        run_device = getattr(step.kernel.run, "run_device", None)
        for hook in hooks:
            hook.before(step)
        try:
            if run_device is not None:
                result = run_device(*args)
            else:
                result = step.kernel.run(*[to_host(a) for a in args])
        except EdgeCNNError:
            raise
        except Exception as exc:
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
        value = frame[plan.slots[name]]
        array = np.asarray(value)
        results[name] = array.copy() if id(value) in feed_ids or not array.flags.owndata else array
    return results
