"""How a run lays out its memory and runs each step (seed 004's MPool).

On the CPU one preallocated buffer per plan holds every intermediate tensor at the offset the
buffer planner chose, and kernels write into views of it (``run_into``), so a steady-state run
allocates only the arrays it returns. A ``MemoryPlan`` is built once, by ``build_plan``; its arenas
come from a small pool, one per concurrent run (two threads never share an arena). The caller's
results get buffers of their own, written directly by the kernel that produces them: returning them
costs no copy, and they stay valid whatever later runs write into the arena.

On other devices every step returns its outputs (device tensors) and the frame drops each value
after its last reader; the same MemoryPlan describes that run, with every step opaque.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgecnn.devices import to_host
from edgecnn.ir.graph import TensorType
from edgecnn.ops.registry import get_op
from edgecnn.ops.traits import is_view_step, reference_adapter, slab_offsets
from edgecnn.runtime.buffers import BufferPlan, StepIO, TensorInfo, plan_buffers
from edgecnn.runtime.memory import ALIGNMENT
from edgecnn.runtime.plan import Program, Step

MAX_IDLE_ARENAS = 4
"""Arenas a plan keeps for reuse; more concurrent runs than this allocate (and drop) their own."""

SKIP, VIEW, INTO, OPAQUE = range(4)

OWN, COPY, CONSTANT, CHECK, HOST = range(5)
"""How a run returns a result: its own buffer as it is, a copy (of the arena, the caller's input, or
a buffer another result already took), a constant's copy, the ownership test at run time (outputs
of opaque steps, which may or may not alias an input), or a device tensor copied to the host."""


@dataclass(frozen=True)
class Action:
    """How the executor runs one step in arena mode."""

    code: int  # SKIP (a view already in the arena), VIEW (reshape at run time), INTO, OPAQUE
    step: Step
    run: Callable[..., Any]  # run_into for INTO, the kernel for OPAQUE
    shape: tuple[int, ...]  # VIEW, and INTO with ``overwrites``: the output's shape
    releases: tuple[int, ...]  # slots to drop after the step (values outside the arena)
    overwrites: int = -1  # INTO in place in a buffer made per run: the input slot whose buffer it takes


def tensor_info(t: TensorType | None) -> TensorInfo | None:
    if t is None or not t.is_concrete:
        return None
    shape = t.dims
    return TensorInfo(t.dtype, shape, math.prod(shape) * np.dtype(t.dtype).itemsize)


def describe_step(step: Step, plan: Program) -> tuple[StepIO, Callable[..., Any] | None]:
    """The step as the buffer planner sees it, and its write-into callable (None unless ``into``)."""
    node = step.node
    in_types = [plan.types.get(x) if x else None for x in node.inputs]
    out_types = [plan.types.get(x) if x else None for x in node.outputs]
    known = all(s >= 0 for s in step.outputs) and all(tensor_info(t) for t in out_types)
    if known and step.kernel.name == "reference" and is_view_step(node, in_types, out_types):
        return StepIO(step.inputs, step.outputs, "view"), None
    if known:
        into = getattr(step.kernel.run, "run_into", None)
        in_place: tuple[int, ...] = ()
        if into is not None:
            declared = getattr(step.kernel.run, "in_place", False)  # True: input 0; or positions
            in_place = (0,) if declared is True else tuple(declared or ())
        elif step.kernel.name == "reference":
            adapter = reference_adapter(node, in_types, out_types)
            if adapter is not None:
                into, in_place = adapter.run_into, adapter.in_place
        if into is not None:
            # a Concat's inputs (a Split's outputs) that are contiguous slabs of the whole: the
            # planner may place them in it, whichever kernel would otherwise copy them
            slabs = slab_offsets(node, in_types, out_types)  # () for ops without the trait
            side = get_op(node.op).slabs if slabs else None
            concat = slabs if side == "inputs" else ()
            split = slabs if side == "outputs" else ()
            return StepIO(step.inputs, step.outputs, "into", in_place, concat, split), into
    return StepIO(step.inputs, step.outputs, "opaque"), None


FastEntry = tuple[
    int,
    Callable[..., Any],
    tuple[int, ...],
    int,
    "tuple[int, ...] | None",
    int,
    tuple[int, ...],
    tuple[int, ...],
    Step,
]
"""An action unpacked for the executor's hook-free loop: (code, run, inputs, output, outputs or None
for one output, overwrites, shape, releases, step). Plain tuples: one unpacking per step instead of
a dozen attribute lookups."""


def fast_entry(action: Action) -> FastEntry:
    step = action.step
    outputs = None if len(step.outputs) == 1 else tuple(step.outputs)
    return (
        action.code,
        action.run,
        tuple(step.inputs),
        step.outputs[0] if step.outputs else -1,
        outputs,
        action.overwrites,
        action.shape,
        action.releases,
        step,
    )


class Arena:
    """One run's memory: the buffer and the frame template with every arena tensor's view in it."""

    def __init__(self, memory: MemoryPlan) -> None:
        size = memory.buffers.arena_bytes
        raw = np.empty(size + ALIGNMENT, dtype=np.uint8)
        start = -raw.ctypes.data % ALIGNMENT
        self.buffer = raw[start : start + size]
        frame = list(memory.program.frame_template)
        for slot, root in memory.buffers.root.items():
            if memory.buffers.kind[root] != "arena":
                continue
            info = memory.tensors[slot]
            offset = memory.buffers.layout.offsets[root] + memory.buffers.offset.get(slot, 0)
            view = self.buffer[offset : offset + info.nbytes].view(info.dtype).reshape(info.shape)
            frame[slot] = view
        self.template: tuple[np.ndarray | None, ...] = tuple(frame)


def _on_device(step: Step) -> Callable[..., Any]:
    """The callable an opaque step runs on a non-CPU device: ``run_device`` (activations stay on the
    device), else the host kernel on host copies of its inputs."""
    run_device = getattr(step.kernel.run, "run_device", None)
    if run_device is not None:
        return run_device
    run = step.kernel.run

    def on_host(*args: Any) -> Any:
        return run(*[to_host(a) for a in args])

    return on_host


class MemoryPlan:
    """The buffer plan, per-step actions and result handling of one program for one set of
    requested tensors: everything a run needs besides its inputs, decided once. ``in_arena``: CPU
    kernels writing into an arena; otherwise every step returns its outputs (device tensors, or a
    partitioned step's gathered result) and results are copied to the host."""

    def __init__(self, program: Program, wanted: tuple[str, ...], in_arena: bool) -> None:
        self.program = program
        self.wanted = frozenset(program.slots[n] for n in wanted if n not in program.constants)
        self.in_arena = in_arena
        described = [
            describe_step(step, program) if in_arena else (StepIO(step.inputs, step.outputs, "opaque"), None)
            for step in program.steps
        ]
        names = {slot: name for name, slot in program.slots.items()}
        self.tensors: dict[int, TensorInfo] = {}
        for slot, name in names.items():
            info = tensor_info(program.types.get(name))
            if info is not None:
                self.tensors[slot] = info
        sources = [*program.input_slots.values(), *program.constant_slots]
        self.buffers: BufferPlan = plan_buffers(
            [io for io, _ in described], self.tensors, sources, set(self.wanted)
        )
        static = {s for s, r in self.buffers.root.items() if self.buffers.kind[r] == "arena"}
        self.external = [(r, self.tensors[r]) for r in self.buffers.roots_of_kind("external")]
        self.external_types = tuple((r, info.shape, np.dtype(info.dtype)) for r, info in self.external)
        # slabs of those (inputs of an elided Concat whose output is returned through a view)
        self.external_slabs = tuple(
            (slot, self.buffers.root[slot], at, self.tensors[slot])
            for slot, at in self.buffers.offset.items()
            if self.buffers.kind.get(self.buffers.root[slot]) == "external"
        )
        actions = []
        for step, (io, into) in zip(program.steps, described):
            releases = tuple(s for s in step.releases if s not in static and s not in self.wanted)
            if not in_arena:
                actions.append(Action(OPAQUE, step, _on_device(step), (), releases))
            elif io.mode == "view":
                out = step.outputs[0]
                code = SKIP if out in static else VIEW
                shape = self.tensors[out].shape
                actions.append(Action(code, step, step.kernel.run, shape, releases))
            elif len(actions) in self.buffers.elided:
                # a Concat's inputs in their slabs, a Split's outputs in its input
                actions.append(Action(SKIP, step, step.kernel.run, (), releases))
            elif io.mode == "into":
                assert into is not None
                position = self.buffers.in_place.get(len(actions), -1)
                out = step.outputs[0]
                if position >= 0 and out not in static:  # in place in a result's own buffer
                    actions.append(
                        Action(INTO, step, into, self.tensors[out].shape, releases, step.inputs[position])
                    )
                else:
                    actions.append(Action(INTO, step, into, (), releases))
            else:
                actions.append(Action(OPAQUE, step, step.kernel.run, (), releases))
        self.actions = tuple(actions)
        self.entries = tuple(fast_entry(action) for action in actions)
        self.input_slots = tuple(program.input_slots.values())
        self.results = self._result_modes(wanted)
        self._idle: list[Arena] = []
        self._lock = threading.Lock()

    def _result_modes(self, wanted: tuple[str, ...]) -> tuple[tuple[int, int, np.ndarray | None], ...]:
        """(mode, slot, constant) per requested name, in order: how a run returns each."""
        program, buffers = self.program, self.buffers
        modes: list[tuple[int, int, np.ndarray | None]] = []
        claimed: set[int] = set()
        for name in wanted:
            if name in program.constants:
                modes.append((CONSTANT, -1, program.constants[name]))
                continue
            slot = program.slots[name]
            if not self.in_arena:
                modes.append((HOST, slot, None))
                continue
            root = buffers.root.get(slot, slot)
            kind = buffers.kind.get(root)
            mode = COPY
            if root not in claimed and kind in ("external", "opaque"):
                claimed.add(root)
                mode = OWN if kind == "external" else CHECK
            modes.append((mode, slot, None))
        return tuple(modes)

    @property
    def arena_bytes(self) -> int:
        return self.buffers.arena_bytes

    @property
    def outside_arena_bytes(self) -> int:
        """Bytes a run holds besides the arena at its peak: the returned tensors (alive throughout)
        plus the most that outputs of opaque steps hold at once (each is dropped after its last
        reader, as its lifetime says)."""
        size = {r: self.tensors[r].nbytes for r in self.buffers.kind if r in self.tensors}
        external = sum(size.get(r, 0) for r in self.buffers.roots_of_kind("external"))
        change = [0] * (len(self.program.steps) + 2)  # bytes born minus bytes dropped, per step
        for r in self.buffers.roots_of_kind("opaque"):
            first, last = self.buffers.lifetime[r]
            change[first] += size.get(r, 0)
            change[last + 1] -= size.get(r, 0)
        return external + max(itertools.accumulate(change[:-1]))

    def acquire(self) -> Arena:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return Arena(self)

    def release(self, arena: Arena) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE_ARENAS:
                self._idle.append(arena)
