"""Which buffer every tensor of a plan lives in, before any arena exists.

Three kinds of steps (``StepIO.mode``):

- ``view``: Reshape/Flatten/Squeeze/Unsqueeze/Identity; the output is the input's buffer read with
  another shape, so it shares the input's *root* buffer and extends that buffer's lifetime;
- ``into``: the kernel writes into a buffer it is given (the ``run_into`` protocol); its output gets
  a root of its own, or the buffer of an input it may overwrite (``in_place``) when that input's root
  is read by nobody after this step, has the output's type and is an arena buffer;
- ``opaque``: the kernel returns arrays of its own making, which may alias any of its inputs, so
  every input root lives as long as the output does.

A Concat whose inputs are contiguous slabs of its output (``concat_offsets``: every dimension
before the axis is 1, as for channels at batch 1) is *elided* when every input's buffer can be
placed in the output's so that the input lies at its slab (``_slab_placement``): the producers
write straight into their slab of the output's buffer, and the Concat step has nothing left to do
(GoogLeNet, SqueezeNet; a YOLOv8 C2f block, whose Concat reads the parts of a Split). A Split whose outputs
are contiguous slabs of its input (``split_offsets``) is elided the same way when its input is an
arena buffer: its outputs are read where they lie, as members of the input's buffer that extend its
lifetime (ShuffleNetV2's channel split).

Roots produced by ``into`` steps go to the arena (``plan_arena``), except those holding a tensor the
caller receives (``pinned``): those get a fresh buffer per run ("external") so that results never
alias the arena, without a copy at the end.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from edgecnn.runtime.memory import ArenaLayout, BufferRequest, align, plan_arena

StepMode = Literal["view", "into", "opaque"]
RootKind = Literal["source", "arena", "external", "opaque"]


@dataclass(frozen=True)
class StepIO:
    """What the buffer planner needs to know of one step (slots are -1 when omitted)."""

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    mode: StepMode
    in_place: tuple[int, ...] = ()  # input positions an ``into`` step may overwrite with its output
    concat_offsets: tuple[int, ...] = ()  # a Concat: byte offset of each input in the output
    split_offsets: tuple[int, ...] = ()  # a Split: byte offset of each output in the input


@dataclass(frozen=True)
class TensorInfo:
    """A slot's element type and shape, and its size in bytes."""

    dtype: str
    shape: tuple[int, ...]
    nbytes: int


@dataclass
class BufferPlan:
    root: dict[int, int]  # slot -> the slot whose buffer it lives in
    kind: dict[int, RootKind]  # root -> where that buffer comes from
    in_place: dict[int, int]  # step index -> position of the input it overwrites
    layout: ArenaLayout  # offsets of the "arena" roots
    lifetime: dict[int, tuple[int, int]]  # root -> (first, last) step
    naive_bytes: int  # every produced tensor in a buffer of its own
    members: dict[int, list[int]] = field(default_factory=dict)  # root -> slots living in it
    offset: dict[int, int] = field(default_factory=dict)  # slot -> byte offset in its root (if not 0)
    elided: set[int] = field(default_factory=set)  # Concat steps whose inputs were written in place

    @property
    def arena_bytes(self) -> int:
        return self.layout.size

    def roots_of_kind(self, kind: RootKind) -> list[int]:
        return [r for r, k in self.kind.items() if k == kind]


def plan_buffers(
    steps: Sequence[StepIO],
    tensors: Mapping[int, TensorInfo],
    sources: Sequence[int],
    pinned: set[int],
) -> BufferPlan:
    """Assign every produced slot a root buffer and place the arena roots.

    ``sources``: slots that exist before the first step (inputs, constants); ``pinned``: slots the
    caller receives, alive until the end. Every slot an ``into`` or ``view`` step produces must be
    in ``tensors``."""
    end = len(steps)
    last_read: dict[int, int] = {}
    for index, step in enumerate(steps):
        for s in step.inputs:
            if s >= 0:
                last_read[s] = index
    root: dict[int, int] = {s: s for s in sources}
    kind: dict[int, RootKind] = {s: "source" for s in sources}
    members: dict[int, list[int]] = {s: [s] for s in sources}
    produced_at: dict[int, int] = {}
    depends: dict[int, set[int]] = {}  # opaque root -> roots its value may alias
    referenced: set[int] = set()  # roots some opaque value may alias
    in_place: dict[int, int] = {}
    produced: list[int] = []
    offset: dict[int, int] = {}
    elided: set[int] = set()
    # root -> the last step that reads any of its members (past the end if one is pinned): kept up
    # to date as members join, so that the in-place test costs O(1) however long a chain grows
    reach: dict[int, int] = {}

    def reach_of(slot: int) -> int:
        return end + 1 if slot in pinned else last_read.get(slot, -1)

    def join(r: int, slot: int) -> None:
        root[slot] = r
        members[r].append(slot)
        reach[r] = max(reach[r], reach_of(slot))

    def new_root(slot: int, index: int, root_kind: RootKind) -> None:
        root[slot] = slot
        kind[slot] = root_kind
        members[slot] = [slot]
        produced_at[slot] = index
        reach[slot] = reach_of(slot)

    for s in sources:
        reach[s] = reach_of(s)

    def free_after(r: int, index: int) -> bool:
        """Whether root r's buffer is read by nobody after step ``index``."""
        return kind.get(r) == "arena" and r not in referenced and reach[r] <= index

    for index, step in enumerate(steps):
        produced.extend(s for s in step.outputs if s >= 0)
        if step.mode == "view":
            r = root[step.inputs[0]]
            out = step.outputs[0]
            join(r, out)
            if step.inputs[0] in offset:
                offset[out] = offset[step.inputs[0]]
        elif step.mode == "into":
            out = step.outputs[0]
            chosen = None
            if len(step.outputs) == 1 and out not in pinned:
                for position in step.in_place:
                    source = step.inputs[position] if position < len(step.inputs) else -1
                    if source < 0 or tensors.get(source) != tensors[out]:
                        continue
                    if free_after(root[source], index):
                        chosen = position
                        break
            if chosen is not None:
                r = root[step.inputs[chosen]]
                join(r, out)
                in_place[index] = chosen
                if step.inputs[chosen] in offset:
                    offset[out] = offset[step.inputs[chosen]]
            elif (
                step.concat_offsets
                and out not in pinned
                and (
                    placed := _slab_placement(
                        step, root, kind, members, offset, produced_at, tensors, reach_of, referenced | pinned
                    )
                )
            ):
                new_root(out, min(produced_at[r] for r in placed), "arena")
                for r, shift in placed.items():  # each input's whole buffer moves into the output's
                    slots = members.pop(r)
                    del kind[r], produced_at[r], reach[r]
                    for slot in slots:
                        offset[slot] = shift + offset.get(slot, 0)
                        join(out, slot)
                elided.add(index)
            elif step.split_offsets and _viewable_split(step, root, kind, referenced | pinned):
                r = root[step.inputs[0]]
                base = offset.get(step.inputs[0], 0)
                for slot, at in zip(step.outputs, step.split_offsets):
                    join(r, slot)
                    offset[slot] = base + at
                elided.add(index)
            else:
                for slot in step.outputs:
                    new_root(slot, index, "arena")
        else:
            input_roots = {root[s] for s in step.inputs if s >= 0 and s in root}
            for slot in step.outputs:
                if slot >= 0:
                    new_root(slot, index, "opaque")
                    depends[slot] = input_roots
            referenced |= input_roots

    last: dict[int, int] = {}
    for r, slots in members.items():
        if kind[r] == "source":
            continue
        span = produced_at[r]
        for m in slots:
            span = max(span, end if m in pinned else last_read.get(m, span))
        last[r] = span
    for r in sorted(depends, key=lambda slot: -produced_at[slot]):  # latest first: chains propagate
        for d in depends[r]:
            if d in last:
                last[d] = max(last[d], last[r])
    for r, slots in members.items():
        if kind[r] == "arena" and any(m in pinned for m in slots):
            kind[r] = "external"
    requests = [
        BufferRequest(r, tensors[r].nbytes, produced_at[r], last[r]) for r in members if kind[r] == "arena"
    ]
    naive = sum(align(max(tensors[s].nbytes, 1)) for s in produced if s in tensors)
    return BufferPlan(
        root=root,
        kind=kind,
        in_place=in_place,
        layout=plan_arena(requests),
        lifetime={r: (produced_at[r], last[r]) for r in last},
        naive_bytes=naive,
        members=members,
        offset=offset,
        elided=elided,
    )


def _viewable_split(
    step: StepIO, root: dict[int, int], kind: dict[int, RootKind], excluded: set[int]
) -> bool:
    """The Split's outputs can be read where they lie in its input: an arena buffer that no opaque
    value may alias, outputs not returned to the caller (they would alias the input)."""
    source = step.inputs[0] if step.inputs else -1
    if source < 0 or source not in root or any(s < 0 or s in excluded for s in step.outputs):
        return False
    return kind.get(root[source]) == "arena" and root[source] not in excluded


def _slab_placement(
    step: StepIO,
    root: Mapping[int, int],
    kind: Mapping[int, RootKind],
    members: Mapping[int, list[int]],
    offset: Mapping[int, int],
    produced_at: Mapping[int, int],
    tensors: Mapping[int, TensorInfo],
    reach_of: Callable[[int], int],
    excluded: set[int],
) -> dict[int, int]:
    """Where each input's root buffer lies in the Concat's output (root -> byte offset) so that
    every input sits at its slab, or {} when that cannot be done.

    An input may be a member of a larger buffer (a Split's part, a nested Concat's output, the
    end of an in-place chain): the whole buffer moves, so inputs sharing one must agree on where it
    goes. The buffers must be arena buffers that no opaque value may alias and that hold nothing
    returned to the caller, and must fit in the output. Two of them may overlap only where every
    tensor of the earlier one in the overlap is read for the last time before the later one's first
    step (a Split's part that a branch consumed, where that branch's result is written)."""
    shifts: dict[int, int] = {}
    for slot, at in zip(step.inputs, step.concat_offsets):
        r = root.get(slot, -1)
        if slot < 0 or kind.get(r) != "arena" or r in excluded or any(m in excluded for m in members[r]):
            return {}
        shift = at - offset.get(slot, 0)
        if shifts.setdefault(r, shift) != shift:  # an input given twice, or a buffer's parts reordered
            return {}
    size = tensors[step.outputs[0]].nbytes
    extent = {r: (shift, shift + tensors[r].nbytes) for r, shift in shifts.items()}
    if any(low < 0 or high > size for low, high in extent.values()):
        return {}
    for earlier, later in itertools.permutations(shifts, 2):
        (low, high), (first, last) = extent[later], extent[earlier]
        if produced_at[earlier] > produced_at[later] or last <= low or high <= first:
            continue
        if produced_at[earlier] == produced_at[later]:  # written by one step: they would clash
            return {}
        for m in members[earlier]:
            start = shifts[earlier] + offset.get(m, 0)
            if start < high and low < start + tensors[m].nbytes and reach_of(m) >= produced_at[later]:
                return {}
    return shifts
