"""Memory planning: liveness of every intermediate tensor, then arena offsets such that
tensors whose lifetimes overlap never share bytes (the MPool idea of seed 004)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
    offsets: dict[int, int] = {}
    for req in sorted(requests, key=lambda r: (-r.nbytes, r.first, r.key)):
        size = align(max(req.nbytes, 1), alignment)
        overlapping = {i for step in range(req.first, req.last + 1) for i in live_at.get(step, ())}
        busy = sorted(placed[i] for i in overlapping)
        offset = 0
        for start, end in busy:
            if offset + size <= start:
                break
            offset = max(offset, end)
        offsets[req.key] = offset
        for step in range(req.first, req.last + 1):
            live_at.setdefault(step, []).append(len(placed))
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
