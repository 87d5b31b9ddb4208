"""Plans: a graph specialised to concrete input types — constants folded, kernels chosen,
tensors numbered into slots, and the step after which each slot can be released."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgecnn.ir.graph import Graph, Node, TensorType
from edgecnn.kernels.registry import KernelChoice, select_kernel
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.runtime.shapes import infer_graph


@dataclass(frozen=True)
class Step:
    """One prepared node: the kernel to call and where its inputs/outputs live (-1 = omitted)."""

    node: Node
    kernel: KernelChoice
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    releases: tuple[int, ...]  # slots whose last reader is this step


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    slots: Mapping[str, int]
    input_slots: Mapping[str, int]
    constant_slots: frozenset[int]
    frame_template: tuple[np.ndarray | None, ...]
    types: Mapping[str, TensorType]
    constants: Mapping[str, np.ndarray]  # initializers and folded tensors, by name
    device: str = "cpu"  # "cpu" runs in an arena (runtime/arena.py)
    # runtime.arena.MemoryPlan per set of requested slots, built on first use
    # MemoryPlans by requested slots, and by requested names (the executor's per-run lookup)
    memory_plans: dict[frozenset[int] | tuple[str, ...], Any] = field(
        default_factory=dict, compare=False, repr=False
    )

    def new_frame(self) -> list[np.ndarray | None]:
        """A fresh per-run value table, holding the constants."""
        return list(self.frame_template)


def _preparing_weights(device: str) -> AbstractContextManager[None]:
    """BLAS on one thread while CPU kernels prepare their weights (Winograd filter transforms,
    packing): those GEMMs are skinny and short, and waking OpenBLAS's other threads for each costs
    more than it saves, several times more when another process holds the other cores
    (docs/startup.md). Runs hold BLAS at one thread as well (threads.cpu_threads)."""
    from edgecnn.devices import parse_device

    if parse_device(device).kind != "cpu":
        return nullcontext()
    from edgecnn.kernels.cpu.system.threads import blas_single_threaded

    return blas_single_threaded()


def build_plan(graph: Graph, input_types: Mapping[str, TensorType], options: RuntimeOptions) -> Plan:
    """Specialise a topologically sorted graph to concrete input types."""
    inferred = infer_graph(graph, input_types, fold=True)
    slots: dict[str, int] = {}

    def slot(name: str) -> int:
        if not name:
            return -1
        return slots.setdefault(name, len(slots))

    for name in input_types:
        slot(name)
    live_nodes = [n for n in graph.nodes if id(n) not in inferred.folded_nodes]
    raw_steps = []
    with _preparing_weights(options.device):
        for node in live_nodes:
            in_types = [inferred.types.get(x) if x else None for x in node.inputs]
            in_values = [inferred.values.get(x) if x else None for x in node.inputs]
            kernel = select_kernel(node, in_types, in_values, backend=options.device, threads=options.threads)
            raw_steps.append(
                (node, kernel, tuple(slot(x) for x in node.inputs), tuple(slot(x) for x in node.outputs))
            )
    for name in graph.outputs:
        slot(name)

    constant_slots = {slots[n] for n in inferred.values if n in slots}
    template: list[np.ndarray | None] = [None] * len(slots)
    for name, value in inferred.values.items():
        if name in slots:
            template[slots[name]] = value

    last_reader: dict[int, int] = {}
    for index, (_, _, ins, _) in enumerate(raw_steps):
        for s in ins:
            if s >= 0:
                last_reader[s] = index
    keep = constant_slots | {slots[n] for n in graph.outputs}
    releases: list[list[int]] = [[] for _ in raw_steps]
    for s, index in last_reader.items():
        if s not in keep:
            releases[index].append(s)
    steps = tuple(
        Step(node, kernel, ins, outs, tuple(rel))
        for (node, kernel, ins, outs), rel in zip(raw_steps, releases)
    )
    return Plan(
        steps=steps,
        slots=slots,
        input_slots={name: slots[name] for name in input_types},
        constant_slots=frozenset(constant_slots),
        frame_template=tuple(template),
        types=inferred.types,
        constants=inferred.values,
        device=options.device,
    )
