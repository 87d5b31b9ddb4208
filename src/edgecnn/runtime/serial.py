"""Whether a run is worth a second thread at all: a model with little work per run (SimpleCNN,
LeNet-5) runs on the calling thread alone, whatever ``threads`` asks for.

Why: the kernels' own grains (kernels/cpu/system/threads.py) judge one layer at a time, on a warm pool.
A run that follows an idle spell (a camera pipeline waiting for its next frame, `edgecnn bench`
pausing between runs) first waits for the pool's worker to wake, about 90 us on the 2-core EPYC
(benchmarks/wake.py, docs/tuning.md "Waking the pool"): more than a second thread saves on a
model whose whole run takes about 0.1 ms on one. The rule is per plan (model and input shapes), so
a larger batch of the same model can still use every thread.
"""

from __future__ import annotations

from edgecnn.runtime.plan import Program

SERIAL_MODEL_MACS = 20_000_000
"""Multiply-adds per run below which the run stays on one thread. benchmarks/rule_ab.py with the
rule off (docs/tuning.md, "Small models on one thread"): SimpleCNN (6.5 M) took 0.84x the time
on one thread after a 20 ms pause, 0.95x back to back; the next zoo model, ShuffleNetV2, has 145 M."""


def plan_macs(plan: Program) -> int:
    """Multiply-adds of one run of the plan's compute-bound steps (each op's ``macs`` trait)."""
    from edgecnn.ops.traits import layer_macs

    macs = 0
    for step in plan.steps:
        node = step.node
        in_types = [plan.types.get(x) if x else None for x in node.inputs]
        out_type = plan.types.get(node.outputs[0]) if node.outputs and node.outputs[0] else None
        macs += layer_macs(node, in_types, out_type)
    return macs


def run_threads(plan: Program, threads: int) -> int:
    """The threads a run of ``plan`` uses: ``threads``, or 1 below SERIAL_MODEL_MACS (read at call
    time, so benchmarks can patch it)."""
    return 1 if threads > 1 and plan_macs(plan) < SERIAL_MODEL_MACS else threads
