"""Static analysis of a model for one input shape: per-layer output shapes, parameters, MACs and
activation memory (naive vs planned) — what `edgecnn info` prints.

For device "cpu" the planned figure is what the runtime really holds per run (runtime/arena.py):
its arena plus the buffers it allocates outside it (returned outputs, steps without ``run_into``)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import Node, TensorType
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


def numel(t: TensorType | None) -> int:
    """Elements of a tensor type; 0 when the type or its shape is unknown."""
    if t is None or not t.is_concrete:
        return 0
    return int(np.prod(t.shape, dtype=np.int64))  # type: ignore[arg-type]


def _dims(t: TensorType | None) -> tuple[int, ...] | None:
    return tuple(t.shape) if t is not None and t.is_concrete else None  # type: ignore[arg-type]


_WEIGHT_INPUT = {"QLinearConv": 3, "Int8Conv": 3, "QLinearMatMul": 3, "Int8Gemm": 3}
"""Where the weight input sits when it is not input 1 (the integer ops carry scales first)."""


def layer_macs(node: Node, inputs: list[TensorType | None], output: TensorType | None) -> int:
    """Multiply-accumulates of the compute-bound ops; 0 for data movement and elementwise ops."""
    index = _WEIGHT_INPUT.get(node.op, 1)
    weights = _dims(inputs[index]) if len(inputs) > index else None
    data = _dims(inputs[0]) if inputs else None
    if weights is None or data is None:
        return 0
    per_output = int(np.prod(weights[1:], dtype=np.int64))
    if node.op in ("Conv", "FusedConv", "FusedConvAdd", "QLinearConv", "ConvInteger", "Int8Conv"):
        # Each output element sums over (C_in / group) x kernel window.
        return numel(output) * per_output
    if node.op == "ConvTranspose":
        # Each input element scatters into C_out / group x kernel window outputs.
        return numel(inputs[0]) * per_output
    if node.op in ("Gemm", "FusedGemm", "Int8Gemm"):
        inner = data[0] if getattr(node.attrs, "trans_a", False) else data[-1]
        return numel(output) * inner
    if node.op in ("MatMul", "MatMulInteger", "QLinearMatMul"):
        return numel(output) * data[-1]
    return 0


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
        from edgecnn.runtime.arena import memory_plan

        wanted = frozenset(
            plan.slots[n] for n in graph_outputs if n in plan.slots and n not in plan.constants
        )
        memory = memory_plan(plan, wanted)
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
