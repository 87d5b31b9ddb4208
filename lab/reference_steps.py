"""Which steps of each zoo model run on a numpy reference kernel: plan every model (at batch 1 and
8, the small variants by default) and list, per model, the reference steps by op type and how the
run treats them (a view or an elided Concat/Split costs nothing; "into" is the reference kernel
writing into the arena; "opaque" allocates its result).

    .venv/bin/python lab/reference_steps.py                  # small variants (width 0.125, 64 px)
    .venv/bin/python lab/reference_steps.py --full resnet50  # native width and resolution

With ``--without binary,gelu,...`` it times instead (batch 1, native sizes, in one process,
alternating call by call) each model as planned now and as planned with those CPU kernels removed
from the registry, so that their layers fall back as they did before the kernels existed.
"""

from __future__ import annotations

import argparse
import contextlib
from collections import Counter
from collections.abc import Iterator

import numpy as np

from common import interleaved, load_model, machine_line
from edgecnn.bench.zoo import MODELS, build_model
from edgecnn.kernels import registry
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


@contextlib.contextmanager
def without_kernels(names: set[str]) -> Iterator[None]:
    """Plans built inside the block cannot choose the CPU kernels ``names`` (the registry's own
    table is edited: a lab experiment, restored on exit)."""
    with registry.scoped_registrations():
        for entries in registry._KERNELS.values():
            entries[:] = [e for e in entries if e.name not in names]
        yield


def time_without(names: set[str], models: list[str], threads: int, rounds: int) -> None:
    print(machine_line(threads))
    print(f"\n| model (batch 1) | with the kernels ms | without {', '.join(sorted(names))} ms | ratio |")
    print("|---|---:|---:|---:|")
    for name in models:
        entry = MODELS[name]
        model = build_model(name)
        x = np.random.default_rng(0).standard_normal((1, entry.channels, entry.resolution, entry.resolution))
        x = x.astype(np.float32)
        with_them = load_model(model, threads)
        with_them.plan_for(x)
        without = load_model(model, threads)
        with without_kernels(names):
            without.plan_for(x)  # kept in the model's plan cache, with the fallbacks chosen now
        timers = {"with": lambda m=with_them, v=x: m(v), "without": lambda m=without, v=x: m(v)}
        times = interleaved(timers, rounds)
        ratio = times["with"] / times["without"]
        print(f"| {name} | {times['with']:.2f} | {times['without']:.2f} | {ratio:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(MODELS))
    parser.add_argument("--full", action="store_true", help="native width and resolution")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--without", help="time with and without these CPU kernels (comma-separated)")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    if args.without:
        time_without(set(args.without.split(",")), args.models, args.threads, args.rounds)
        return
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
