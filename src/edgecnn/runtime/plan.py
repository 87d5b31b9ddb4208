"""Plans: a graph specialised, once, to concrete input types and requested tensors.

``build_plan`` decides everything that depends only on (graph, input types, requested tensors,
options): constants folded, a kernel chosen and prepared per node, tensors numbered into slots with
the step after which each can be released, the memory layout and per-step actions of a run
(runtime/arena.py), the threads a run uses (runtime/serial.py) and whether a batch is split over
threads (runtime/batch.py). A run (runtime/executor.py) then only reads the plan: nothing in it
changes after ``build_plan`` returns, so one plan serves any number of concurrent runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from edgecnn.ir.graph import Graph, Node, TensorType
from edgecnn.kernels.registry import KernelChoice, select_kernel
from edgecnn.limits import using_budget
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.runtime.shapes import InferenceResult, infer_graph

if TYPE_CHECKING:
    from edgecnn.runtime.arena import MemoryPlan


@dataclass(frozen=True)
class Step:
    """One prepared node: the kernel to call and where its inputs/outputs live (-1 = omitted)."""

    node: Node
    kernel: KernelChoice
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    releases: tuple[int, ...]  # slots whose last reader is this step


@dataclass(frozen=True)
class Program:
    """What a run computes: the steps in order, every tensor's slot, type and (if constant) value."""

    steps: tuple[Step, ...]
    slots: Mapping[str, int]
    input_slots: Mapping[str, int]  # in the order a run takes its inputs
    constant_slots: frozenset[int]
    frame_template: tuple[np.ndarray | None, ...]
    types: Mapping[str, TensorType]
    constants: Mapping[str, np.ndarray]  # initializers and folded tensors, by name
    device: str = "cpu"

    def new_frame(self) -> list[np.ndarray | None]:
        """A fresh per-run value table, holding the constants."""
        return list(self.frame_template)

    def with_kernels(self, kernels: Sequence[KernelChoice]) -> Program:
        """The same program with each step's kernel replaced (partitioned execution, hetero/)."""
        steps = tuple(
            dataclasses.replace(step, kernel=k) for step, k in zip(self.steps, kernels, strict=True)
        )
        return dataclasses.replace(self, steps=steps)


@dataclass(frozen=True)
class BatchSplit:
    """A batch cut into slices along axis 0 that run side by side, one kernel thread each."""

    parts: int
    plans: Mapping[int, Plan]  # slice batch size -> the plan that runs a slice of that size


@dataclass(frozen=True)
class Plan:
    """A complete, immutable plan: the program, the tensors a run returns, how a run lays out its
    memory and how many threads it uses."""

    program: Program
    wanted: tuple[str, ...]
    memory: MemoryPlan
    threads: int
    split: BatchSplit | None = None

    # The program's fields, read by analysis, profiling and the partitioned runner.
    @property
    def steps(self) -> tuple[Step, ...]:
        return self.program.steps

    @property
    def slots(self) -> Mapping[str, int]:
        return self.program.slots

    @property
    def input_slots(self) -> Mapping[str, int]:
        return self.program.input_slots

    @property
    def constant_slots(self) -> frozenset[int]:
        return self.program.constant_slots

    @property
    def types(self) -> Mapping[str, TensorType]:
        return self.program.types

    @property
    def constants(self) -> Mapping[str, np.ndarray]:
        return self.program.constants

    @property
    def device(self) -> str:
        return self.program.device


def _preparing_weights(device: str) -> AbstractContextManager[None]:
    """BLAS on one thread while CPU kernels prepare their weights (Winograd filter transforms,
    packing): those GEMMs are skinny and short, and waking BLAS's other threads for each costs more
    than it saves. Runs hold BLAS at one thread as well (threads.cpu_threads)."""
    from edgecnn.devices import parse_device

    if parse_device(device).kind != "cpu":
        return nullcontext()
    from edgecnn.kernels.cpu.system.threads import blas_single_threaded

    return blas_single_threaded()


def build_program(
    graph: Graph,
    input_types: Mapping[str, TensorType],
    options: RuntimeOptions,
    inferred: InferenceResult | None = None,
) -> Program:
    """Infer types (once; or take ``inferred``, the graph's inference for these input types),
    fold constants, choose and prepare a kernel per remaining node, number the tensors into
    slots. ``graph`` must be topologically sorted."""
    from edgecnn.kernels.tuning import choices_read_once

    if inferred is None:
        inferred = infer_graph(graph, input_types, fold=True, budget=options.budget)
    slots: dict[str, int] = {}

    def slot(name: str) -> int:
        if not name:
            return -1
        return slots.setdefault(name, len(slots))

    for name in input_types:
        slot(name)
    live_nodes = [n for n in graph.nodes if id(n) not in inferred.folded_nodes]
    raw_steps = []
    with _preparing_weights(options.device), choices_read_once():
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
    return Program(
        steps=steps,
        slots=slots,
        input_slots={name: slots[name] for name in input_types},
        constant_slots=frozenset(constant_slots),
        frame_template=tuple(template),
        types=inferred.types,
        constants=inferred.values,
        device=options.device,
    )


def plan_program(
    program: Program,
    wanted: Sequence[str],
    threads: int,
    split: BatchSplit | None = None,
    *,
    in_arena: bool | None = None,
) -> Plan:
    """A plan that runs ``program`` for the ``wanted`` tensors on ``threads`` threads; CPU programs
    run in an arena unless ``in_arena`` says otherwise (runtime/arena.py)."""
    from edgecnn.runtime.arena import MemoryPlan

    arena = program.device == "cpu" if in_arena is None else in_arena
    return Plan(program, tuple(wanted), MemoryPlan(program, tuple(wanted), arena), threads, split)


def build_plan(
    graph: Graph,
    input_types: Mapping[str, TensorType],
    options: RuntimeOptions,
    wanted: Sequence[str] | None = None,
    inferred: InferenceResult | None = None,
) -> Plan:
    """Specialise a topologically sorted graph to concrete input types; ``wanted`` names the
    tensors a run returns (graph outputs by default; any intermediate tensor may be named);
    ``inferred``: the graph's inference for these input types, if the caller has it already.

    CPU plans are built under ``preparing_cpu_kernels``, and kernels that size their prepared
    state by the memory budget (``MemoryBudget.default()``) see the options' budget."""
    with preparing_cpu_kernels(options, options.device == "cpu"), using_budget(options.budget):
        return _build_plan(graph, input_types, options, wanted, inferred)


def preparing_cpu_kernels(options: RuntimeOptions, cpu: bool) -> AbstractContextManager[None]:
    """Where CPU kernels are chosen (``cpu``): the CPU runtime started first (once per process,
    kernels/cpu/system/startup.py) and the options' tuning record in effect, else the one already
    in effect (kernels/cpu/tuning_record.py). Nothing otherwise: other devices never load numba."""
    if not cpu:
        return nullcontext()
    from edgecnn.kernels.cpu import initialize_cpu_runtime
    from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning, using_cpu_tuning

    initialize_cpu_runtime(options.bind_threads)
    return using_cpu_tuning(options.cpu_tuning or active_cpu_tuning())


def _build_plan(
    graph: Graph,
    input_types: Mapping[str, TensorType],
    options: RuntimeOptions,
    wanted: Sequence[str] | None,
    inferred: InferenceResult | None,
) -> Plan:
    from edgecnn.runtime.serial import run_threads

    names = tuple(graph.outputs if wanted is None else wanted)
    program = build_program(graph, input_types, options, inferred)
    unknown = [n for n in names if n not in program.slots and n not in program.constants]
    if unknown:
        from edgecnn.errors import InputError

        raise InputError(f"unknown tensor name(s) {', '.join(map(repr, unknown))}")
    threads = run_threads(program, options.threads) if options.device == "cpu" else options.threads
    split = None
    if options.device == "cpu":
        from edgecnn.runtime.batch import batch_parts

        parts = batch_parts(program, input_types, names, options, threads)
        if parts > 1:
            split = _slice_plans(graph, input_types, options, names, parts)
    plan = plan_program(program, names, threads, split)
    check_plan_memory(plan, graph.name, options)
    return plan


def plan_bytes(plan: Plan) -> int:
    """What a plan holds and a run of it allocates: its constants (about what their prepared
    forms take again), one arena and the tensors a run keeps outside it, and its slices' plans."""
    constants = sum(value.nbytes for value in plan.constants.values())
    total = constants + plan.memory.arena_bytes + plan.memory.outside_arena_bytes
    if plan.split is not None:
        total += sum(plan.split.parts * p.memory.arena_bytes for p in plan.split.plans.values())
    return total


def check_plan_memory(plan: Plan, graph_name: str, options: RuntimeOptions) -> None:
    """GraphError, before any arena exists, if a plan needs more than the memory limit: what it
    holds and what its largest step allocates while it runs (runtime/memory.py run_workspace)."""
    from edgecnn.errors import GraphError
    from edgecnn.runtime.memory import run_workspace

    workspace, detail = run_workspace(plan)
    what = f"graph '{graph_name}': the plan for these input shapes ({detail})"
    options.budget.check(plan_bytes(plan) + workspace, what, GraphError)


def _slice_plans(
    graph: Graph,
    input_types: Mapping[str, TensorType],
    options: RuntimeOptions,
    wanted: tuple[str, ...],
    parts: int,
) -> BatchSplit:
    """The plans of a split batch's slices (one per distinct slice size), run whole on one thread each."""
    from edgecnn.runtime.batch import slice_bounds

    batch = next(iter(input_types.values())).dims[0]
    sizes = {hi - lo for lo, hi in slice_bounds(batch, parts)}
    whole = dataclasses.replace(options, batch_parallel="never")
    plans = {}
    for size in sorted(sizes):
        types = {n: TensorType(t.dtype, (size, *t.dims[1:])) for n, t in input_types.items()}
        program = build_program(graph, types, whole)
        plans[size] = plan_program(program, wanted, 1)
    return BatchSplit(parts, plans)
