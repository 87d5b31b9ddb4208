"""Which steps of each zoo model run on a numpy reference kernel: plan every model (at batch 1 and
8, the small variants by default) and list, per model, the reference steps by op type and how the
run treats them (a view or an elided Concat/Split costs nothing; "into" is the reference kernel
writing into the arena; "opaque" allocates its result).

    .venv/bin/python lab/reference_steps.py                  # small variants (width 0.125, 64 px)
    .venv/bin/python lab/reference_steps.py --full resnet50  # native width and resolution
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from common import load_model
from edgecnn.bench.zoo import MODELS, build_model
from edgecnn.runtime.arena import INTO, OPAQUE, SKIP, VIEW
from edgecnn.runtime.plan import Plan

ACTION = {SKIP: "view", VIEW: "view", INTO: "into", OPAQUE: "opaque"}


def reference_steps(plan: Plan) -> Counter[tuple[str, str]]:
    """(op, action) -> count of the plan's reference steps, slice plans of a split batch included."""
    found: Counter[tuple[str, str]] = Counter()
    plans = [plan, *(plan.split.plans.values() if plan.split else ())]
    for each in plans:
        for action in each.memory.actions:
            if action.step.kernel.name == "reference":
                found[(action.step.node.op, ACTION[action.code])] += 1
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(MODELS))
    parser.add_argument("--full", action="store_true", help="native width and resolution")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    for name in args.models:
        entry = MODELS[name]
        small = not args.full and entry.build is not None and entry.channels != 1
        model = build_model(name, 0.125, 64) if small else build_model(name)
        net = load_model(model, args.threads)
        side = 64 if small else entry.resolution
        batches = (1,) if entry.fixed_batch else (1, 8)
        for batch in batches:
            x = np.zeros((batch, entry.channels, side, side), np.float32)
            plan = net.plan_for(x)
            found = reference_steps(plan)
            costly = sum(n for (_, action), n in found.items() if action != "view")
            listing = ", ".join(f"{op}/{action} x{n}" for (op, action), n in sorted(found.items()))
            print(
                f"{name:18s} batch {batch}: {len(plan.steps):4d} steps, {costly:3d} on reference: {listing}"
            )


if __name__ == "__main__":
    main()
