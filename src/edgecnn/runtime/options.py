"""RuntimeOptions: the one frozen bag of settings a Model runs with."""

from __future__ import annotations

import os
from dataclasses import dataclass

BATCH_POLICIES = ("auto", "never", "always")
"""How a batch is parallelised (runtime/batch.py): "auto" splits it where measured to pay,
"always" wherever the model allows, "never" leaves the threads to each layer."""


def available_cores() -> int:
    """Cores this process may run on (respects affinity masks / cgroups where the OS tells)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class RuntimeOptions:
    threads: int
    device: str = "cpu"
    optimize: bool = True  # run the graph passes (edgecnn.passes) before planning
    batch_parallel: str = "auto"  # one of BATCH_POLICIES

    @staticmethod
    def resolve(
        threads: int | None = None, device: str = "cpu", optimize: bool = True, batch_parallel: str = "auto"
    ) -> RuntimeOptions:
        """Fill defaults: ``threads`` from the argument, else EDGECNN_NUM_THREADS, else all cores."""
        if threads is None:
            env = os.environ.get("EDGECNN_NUM_THREADS", "").strip()
            if env:
                try:
                    threads = int(env)
                except ValueError:
                    raise ValueError(f"EDGECNN_NUM_THREADS must be an integer, got {env!r}") from None
            else:
                threads = available_cores()
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        if batch_parallel not in BATCH_POLICIES:
            raise ValueError(
                f"batch_parallel must be one of {', '.join(BATCH_POLICIES)}, got {batch_parallel!r}"
            )
        from edgecnn.devices import find_device, parse_device

        name = parse_device(device).name
        if name.startswith(("opencl", "cuda")):
            find_device(name)  # a missing device fails at load, not at the first run
        return RuntimeOptions(threads=threads, device=name, optimize=optimize, batch_parallel=batch_parallel)
