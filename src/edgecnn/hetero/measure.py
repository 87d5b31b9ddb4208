"""Measuring what the planner needs and what it chose: energy meters for a device set, timed runs of a
single device or a partition, and per-layer costs for the fine-grained model."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from edgecnn.errors import DeviceError
from edgecnn.hetero.finegrained import LayerCost
from edgecnn.hetero.profiles import ProfileError
from edgecnn.hetero.slicing import split_spec
from edgecnn.model import Model

if TYPE_CHECKING:
    from edgecnn.energy import EnergyMeter


@dataclass(frozen=True)
class Measured:
    """Time and energy of one inference, averaged over ``iterations``, and where the energy came from."""

    seconds: float
    joules: float
    meters: str
    estimated: bool
    iterations: int

    @property
    def watts(self) -> float:
        return self.joules / self.seconds if self.seconds > 0 else 0.0

    @property
    def edp(self) -> float:
        return self.joules * self.seconds


HOST_CPU = "host CPU"


def hardware_groups(devices: Sequence[str]) -> dict[str, str]:
    """Which devices share hardware: the CPU backends and OpenCL drivers of CPU type (e.g. PoCL) all run on
    the host's cores (group "host CPU"); any other device is its own group."""
    from edgecnn.devices import find_device, parse_device

    groups = {}
    for name in devices:
        kind = parse_device(name).kind
        if kind in ("cpu", "reference"):
            groups[name] = HOST_CPU
            continue
        try:
            info = find_device(name)
        except DeviceError:
            groups[name] = name
            continue
        groups[name] = HOST_CPU if "CPU" in info.device_type.upper().split(" | ") else name
    return groups


def open_meters(devices: Sequence[str]) -> list[tuple[EnergyMeter, str]]:
    """One meter per distinct source covering ``devices`` (e.g. RAPL once for cpu and a CPU-OpenCL device),
    with a note when a device fell back to the labelled CPU-time estimate."""
    from edgecnn.energy import open_meter

    chosen: dict[str, tuple[EnergyMeter, str]] = {}
    for device in devices:
        try:
            meter, note = open_meter("auto", device), ""
        except DeviceError as exc:
            meter, note = open_meter("estimate", device), f" (auto meter unavailable for {device}: {exc})"
        name = str(getattr(meter, "name", type(meter).__name__))
        if name not in chosen:
            chosen[name] = (meter, note)
    return list(chosen.values())


def measure(run: Callable[[], object], devices: Sequence[str], iterations: int, warmup: int = 1) -> Measured:
    """Time ``iterations`` calls of ``run`` after ``warmup`` ones, with every meter of ``devices`` sampling."""
    from edgecnn.energy import PowerMonitor

    if iterations < 1:
        raise ProfileError(f"iterations must be >= 1, got {iterations}")
    for _ in range(warmup):
        run()
    meters = open_meters(devices)
    monitors = [PowerMonitor(meter) for meter, _ in meters]
    for monitor in monitors:
        monitor.__enter__()
    try:
        for _ in range(iterations):
            run()
    finally:
        for monitor in reversed(monitors):
            monitor.__exit__(None, None, None)
    reports = [monitor.report(iterations) for monitor in monitors]
    seconds = max(r.seconds_per_inference for r in reports)
    joules = sum(r.joules_per_inference for r in reports)
    text = "; ".join(
        f"{r.meter} ({'measured' if r.measured else 'ESTIMATED'}): {r.describes}{note}"
        for r, (_, note) in zip(reports, meters)
    )
    return Measured(seconds, joules, text, not all(r.measured for r in reports), iterations)


def layer_costs(
    models: Mapping[str, Model], feeds: Mapping[str, np.ndarray], iterations: int = 3
) -> list[LayerCost]:
    """Each step's best time on every device (``Model.profile``), its bytes in and out, and its split units.

    The plans of one graph on different devices have the same steps in the same order; a mismatch, or
    nodes without unique names (the partition names layers), is a ProfileError."""
    first = next(iter(models.values()))
    plan = first.plan_for(feeds)
    names = [step.node.name for step in plan.steps]
    if any(not n for n in names) or len(set(names)) != len(names):
        raise ProfileError("per-layer planning needs every node to have a unique name")
    seconds: dict[str, list[float]] = {}
    for device, model in models.items():
        layers = model.profile(feeds, iterations=iterations, warmup=1).layers
        if [layer.name for layer in layers] != names:
            raise ProfileError(
                f"{device}: its plan's steps differ from the other devices'; cannot compare layers"
            )
        # The fastest of the runs: a layer's cost without the noise other processes add (shared machines).
        seconds[device] = [layer.min_ms / 1e3 for layer in layers]
    costs = []
    for index, step in enumerate(plan.steps):
        node = step.node

        def nbytes(name: str) -> int:
            t = plan.types.get(name)
            if not name or name in plan.constants or t is None or t.shape is None or not t.is_concrete:
                return 0
            return int(np.prod(t.dims, dtype=np.int64)) * np.dtype(t.dtype).itemsize

        spec = split_spec(node, plan.types, plan.constants)
        costs.append(
            LayerCost(
                name=node.name,
                seconds={d: s[index] for d, s in seconds.items()},
                in_bytes=sum(nbytes(x) for x in node.inputs),
                out_bytes=sum(nbytes(x) for x in node.outputs),
                units=None if spec is None else spec.units,
                sliced_input=bool(spec and spec.unit_inputs),
            )
        )
    return costs
