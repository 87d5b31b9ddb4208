"""Every step of every zoo model (small variants, batch 1 and 8) runs a compiled kernel: a step left
on its op's numpy reference kernel is allowed only where the run does nothing for it (a reshape
view, or a Concat/Split the buffer planner turned into slabs of one buffer). A failure lists the
steps that do run on a reference kernel, by node, op and how the run treats them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgecnn
from bench.test_zoo import SMALL
from edgecnn.bench.zoo import MODELS, model_path
from edgecnn.runtime.arena import SKIP, VIEW
from edgecnn.runtime.plan import Plan

FREE = (SKIP, VIEW)
"""Actions that run no kernel: a view already in the arena, a reshape of one at run time."""

CASES = [
    pytest.param(name, batch, id=f"{name}-b{batch}")
    for name, entry in MODELS.items()
    for batch in ((1,) if entry.fixed_batch else (1, 8))
]


def reference_steps(plan: Plan) -> list[str]:
    """The plan's steps (its batch slices' included) that run a numpy reference kernel."""
    plans = [plan, *(plan.split.plans.values() if plan.split else ())]
    return [
        f"{action.step.node.name} ({action.step.node.op}, action {action.code})"
        for each in plans
        for action in each.memory.actions
        if action.step.kernel.name == "reference" and action.code not in FREE
    ]


@pytest.mark.parametrize(("name", "batch"), CASES)
def test_every_step_runs_a_compiled_kernel(name: str, batch: int, zoo_cache: Path) -> None:
    entry = MODELS[name]
    small = entry.build is not None and entry.channels != 1
    side = SMALL["resolution"] if small else entry.resolution
    path = model_path(name, zoo_cache, SMALL["width"], side) if small else model_path(name, zoo_cache)
    model = edgecnn.load(path, threads=2)
    plan = model.plan_for(np.zeros((batch, entry.channels, side, side), np.float32))
    on_reference = reference_steps(plan)
    assert not on_reference, f"{len(on_reference)} steps on a numpy reference kernel: " + ", ".join(
        on_reference
    )
