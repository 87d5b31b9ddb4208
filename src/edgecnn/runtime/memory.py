"""Memory planning: liveness of every intermediate tensor, then arena offsets such that
tensors whose lifetimes overlap never share bytes (the MPool idea of seed 004); and the workspace a
step allocates while it runs, which the plan's memory check adds to the arena."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from edgecnn.ir.graph import TensorType
from edgecnn.limits import format_bytes
from edgecnn.ops.registry import find_op
from edgecnn.ops.traits import reference_adapter

if TYPE_CHECKING:
    from edgecnn.runtime.plan import Plan, Program, Step

ALIGNMENT = 64
"""Every buffer starts on a cache-line (and AVX-512) boundary."""


@dataclass(frozen=True)
class BufferRequest:
    """A tensor that must live in the arena from step ``first`` to step ``last`` (inclusive)."""

    key: int
    nbytes: int
    first: int
    last: int


@dataclass(frozen=True)
class ArenaLayout:
    offsets: dict[int, int]  # key -> byte offset in the arena
    size: int  # planned arena bytes
    naive_size: int  # bytes if every tensor had its own buffer


def align(n: int, alignment: int = ALIGNMENT) -> int:
    return (n + alignment - 1) // alignment * alignment


def plan_arena(requests: Sequence[BufferRequest], alignment: int = ALIGNMENT) -> ArenaLayout:
    """Greedy-by-size placement: biggest buffers first, each at the lowest offset that does not
    collide with an already placed buffer whose lifetime overlaps its own.

    Placed buffers are listed under every step they live in, so finding those that overlap a new
    one costs its own lifetime's length, not the number placed: a long chain plans in linear time."""
    placed: list[tuple[int, int]] = []  # (offset, end)
    live_at: dict[int, list[int]] = {}  # step -> indices in ``placed`` of the buffers alive then
    starts_at: dict[int, list[int]] = {}  # step -> indices in ``placed`` of the buffers born then
    offsets: dict[int, int] = {}
    for req in sorted(requests, key=lambda r: (-r.nbytes, r.first, r.key)):
        size = align(max(req.nbytes, 1), alignment)
        # an overlapping buffer is alive at req.first or born during req's lifetime: each is met
        # once, not once per step both live (many branches alive at once made that cubic)
        overlapping = set(live_at.get(req.first, ()))
        for step in range(req.first + 1, req.last + 1):
            overlapping.update(starts_at.get(step, ()))
        busy = sorted(placed[i] for i in overlapping)
        offset = 0
        for start, end in busy:
            if offset + size <= start:
                break
            offset = max(offset, end)
        offsets[req.key] = offset
        for step in range(req.first, req.last + 1):
            live_at.setdefault(step, []).append(len(placed))
        starts_at.setdefault(req.first, []).append(len(placed))
        placed.append((offset, offset + size))
    size = max((end for _, end in placed), default=0)
    naive = sum(align(max(r.nbytes, 1), alignment) for r in requests)
    return ArenaLayout(offsets=offsets, size=size, naive_size=naive)


def lifetimes(
    step_inputs: Sequence[Sequence[int]], step_outputs: Sequence[Sequence[int]], pinned: set[int]
) -> dict[int, tuple[int, int]]:
    """(first, last) step of every slot produced by a step; slots in ``pinned`` (graph outputs,
    tensors the caller asked for) live until the end of the run."""
    span: dict[int, list[int]] = {}
    for index, outs in enumerate(step_outputs):
        for slot in outs:
            if slot >= 0:
                span.setdefault(slot, [index, index])
    for index, ins in enumerate(step_inputs):
        for slot in ins:
            if slot in span:
                span[slot][1] = max(span[slot][1], index)
    end = len(step_outputs)
    return {slot: (first, end if slot in pinned else last) for slot, (first, last) in span.items()}


REFERENCE_WORKSPACE = 6
"""What a reference kernel whose op declares no ``workspace`` trait may allocate beyond its
operands, in multiples of their bytes: the largest numpy temporaries of those ops, with a margin."""


def _nbytes(t: TensorType | None) -> int:
    return math.prod(t.dims) * np.dtype(t.dtype).itemsize if t is not None and t.is_concrete else 0


def step_workspace(step: Step, types: Mapping[str, TensorType]) -> int:
    """Bytes ``step`` allocates while it runs beyond its inputs and outputs: for the reference
    kernel, its op's ``workspace`` trait, else REFERENCE_WORKSPACE times its operands; for other
    kernels, their ``workspace`` attribute if they declare one (compiled kernels work in bounded
    per-thread scratch). A reference with a write-into form (``reference_into``) computes in its
    output and allocates at most per-row reductions, so its largest output bounds it."""
    node = step.node
    in_types = [types.get(x) if x else None for x in node.inputs]
    out_types = [types.get(x) if x else None for x in node.outputs]
    if step.kernel.name != "reference":
        return int(getattr(step.kernel.run, "workspace", 0))
    definition = find_op(node.op)
    if definition is not None and definition.workspace is not None:
        return definition.workspace(node.attrs, in_types, out_types)
    if reference_adapter(node, in_types, out_types) is not None:
        return max((_nbytes(t) for t in out_types), default=0)
    return REFERENCE_WORKSPACE * sum(_nbytes(t) for t in (*in_types, *out_types))


def peak_workspace(program: Program) -> tuple[int, Step | None]:
    """The largest workspace of a program's steps (they run one at a time) and its step."""
    best, where = 0, None
    for step in program.steps:
        size = step_workspace(step, program.types)
        if size > best:
            best, where = size, step
    return best, where


def run_workspace(plan: Plan) -> tuple[int, str]:
    """What a run of ``plan`` allocates beyond what the plan holds (its largest step's workspace, or
    with a split batch that of every slice running side by side), and words for a memory error
    naming the largest tensor and that step."""
    size, step = peak_workspace(plan.program)
    if plan.split is not None:
        for sliced in plan.split.plans.values():
            part, where = peak_workspace(sliced.program)
            if part * plan.split.parts > size:
                size, step = part * plan.split.parts, where
    types = plan.program.types
    tensors = [(_nbytes(types.get(name)), name) for name in plan.program.slots]
    largest, name = max(tensors, default=(0, ""))
    words = [f"largest tensor '{name}' of {format_bytes(largest)}"] if largest else []
    if step is not None:
        words.append(f"node {step.node} works in {format_bytes(size)} more while it runs")
    return size, "; ".join(words)
