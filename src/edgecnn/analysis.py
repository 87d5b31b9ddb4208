"""Static analysis of a model for one input shape: per-layer output shapes, parameters, MACs and
activation memory (naive vs planned) — what `edgecnn info` prints.

For device "cpu" the planned figure is what the runtime really holds per run (runtime/arena.py):
its arena plus the buffers it allocates outside it (returned outputs, steps without ``run_into``)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import TensorType
from edgecnn.ops.traits import layer_macs, numel
from edgecnn.runtime.memory import BufferRequest, lifetimes, plan_arena
from edgecnn.runtime.plan import Plan


@dataclass(frozen=True)
class LayerInfo:
    name: str
    op: str
    output: TensorType | None
    params: int  # elements of the constant inputs (weights, biases)
    macs: int  # multiply-accumulates of one run


@dataclass(frozen=True)
class ModelAnalysis:
    layers: list[LayerInfo]
    naive_activation_bytes: int  # every intermediate tensor in its own buffer
    planned_activation_bytes: int  # what a run holds: arena + buffers outside it
    arena_bytes: int = 0  # the arena alone (tensors with disjoint lifetimes share bytes)
    outside_arena_bytes: int = 0  # returned outputs and outputs of steps that allocate their own

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)

    @property
    def macs(self) -> int:
        return sum(layer.macs for layer in self.layers)


def analyze(plan: Plan, graph_outputs: Collection[str]) -> ModelAnalysis:
    """Per-layer table and activation memory of a prepared plan."""
    layers = []
    for step in plan.steps:
        node = step.node
        in_types = [plan.types.get(x) if x else None for x in node.inputs]
        out_type = plan.types.get(node.outputs[0]) if node.outputs and node.outputs[0] else None
        params = sum(numel(plan.types.get(x)) for x in node.inputs if x and x in plan.constants)
        layers.append(LayerInfo(node.name, node.op, out_type, params, layer_macs(node, in_types, out_type)))
    if plan.device == "cpu":
        from edgecnn.runtime.arena import MemoryPlan

        wanted = tuple(n for n in graph_outputs if n in plan.slots)
        same = plan.memory.in_arena and set(plan.wanted) == set(wanted)
        memory = plan.memory if same else MemoryPlan(plan.program, wanted, in_arena=True)
        arena, outside = memory.arena_bytes, memory.outside_arena_bytes
        return ModelAnalysis(layers, memory.buffers.naive_bytes, arena + outside, arena, outside)
    naive, planned = activation_memory(plan, graph_outputs)
    return ModelAnalysis(layers, naive, planned, planned, 0)


def activation_memory(plan: Plan, graph_outputs: Collection[str]) -> tuple[int, int]:
    """(naive, planned) bytes of the tensors the steps produce, every step's output in a buffer of
    its own (devices other than "cpu", which do not run in an arena); graph outputs live to the end."""
    outputs = [tuple(s for s in step.outputs if s >= 0) for step in plan.steps]
    inputs = [tuple(s for s in step.inputs if s >= 0) for step in plan.steps]
    names = {slot: name for name, slot in plan.slots.items()}
    pinned = {plan.slots[name] for name in graph_outputs if name in plan.slots}
    requests = []
    for slot, (first, last) in lifetimes(inputs, outputs, pinned).items():
        t = plan.types.get(names[slot])
        if t is None or not t.is_concrete:
            continue
        requests.append(BufferRequest(slot, numel(t) * np.dtype(t.dtype).itemsize, first, last))
    layout = plan_arena(requests)
    return layout.naive_size, layout.size
