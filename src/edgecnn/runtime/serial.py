"""Whether a run is worth a second thread at all: a model with little work per run (SimpleCNN,
LeNet-5) runs on the calling thread alone, whatever ``threads`` asks for.

Why: the kernels' own grains judge one layer at a time, on a warm pool. A run that follows an idle
spell (a camera pipeline waiting for its next frame) first waits for the pool's worker to wake,
which costs more than a second thread saves on a model whose whole run takes a fraction of a
millisecond. The threshold is ``CpuTuning.serial_model_macs`` (kernels/cpu/tuning_record.py).
The rule is per plan (model and input shapes), so a larger batch of the
same model can still use every thread.
"""

from __future__ import annotations

from edgecnn.runtime.plan import Plan, Program


def plan_macs(plan: Program | Plan) -> int:
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
    """The threads a run of ``plan`` uses: ``threads``, or 1 below the active CPU tuning record's
    ``serial_model_macs``."""
    from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning

    return 1 if threads > 1 and plan_macs(plan) < active_cpu_tuning().serial_model_macs else threads
