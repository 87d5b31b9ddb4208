"""Batch-level parallelism (seed 000: threads = min(threads, batch)): a batch is cut into slices
along axis 0 that run side by side, each on one kernel thread, instead of every layer splitting its
own work over the threads.

Only for models that never mix the images of a batch: every tensor keeps the batch on axis 0 and
every step's op says it treats each image alone with these attributes and constants (its
``per_sample`` trait; ``batch_separable``).
Numba's kernels are then called from several Python threads at once, which its ``workqueue``
threading layer does not allow: only ``omp`` and ``tbb`` qualify (``threading_layer_is_safe``).
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from edgecnn.ir.graph import TensorType
from edgecnn.ops.registry import StepShapes, find_op, op_family
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.runtime.plan import Plan, Program, Step
from edgecnn.runtime.serial import plan_macs


def _shape(plan: Program | Plan, name: str) -> tuple[int, ...] | None:
    t: TensorType | None = plan.types.get(name)
    if t is None or not t.is_concrete:
        return None
    return t.dims


def _step_separable(plan: Program | Plan, step: Step) -> bool:
    """Whether the step treats every image alone: its op's ``per_sample`` trait, given the step's
    shapes and constant inputs (a step whose output shape is unknown never is)."""
    node = step.node
    out = _shape(plan, node.outputs[0]) if node.outputs and node.outputs[0] else None
    definition = find_op(node.op)
    if out is None or definition is None or definition.per_sample is None:
        return False
    shapes = StepShapes(
        attrs=node.attrs,
        inputs=tuple(_shape(plan, x) if x else None for x in node.inputs),
        constants=tuple(plan.constants.get(x) if x else None for x in node.inputs),
        output_rank=len(out),
    )
    return definition.per_sample(shapes)


def batch_separable(plan: Program | Plan, batch: int) -> bool:
    """Whether slices of the batch can run as independent runs of the same model."""
    if batch < 2:
        return False
    for name, slot in plan.slots.items():
        if slot in plan.constant_slots:
            continue
        shape = _shape(plan, name)
        if shape is None or not shape or shape[0] != batch:
            return False
    return all(_step_separable(plan, step) for step in plan.steps)


def threading_layer_is_safe() -> bool:
    """Whether numba's kernels may be entered from several threads at once (False until numba has
    started its pool, i.e. before the first parallel kernel has run)."""
    import numba

    try:
        return numba.threading_layer() in ("omp", "tbb")
    except ValueError:  # not started yet
        return False


def slice_bounds(batch: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ranges covering 0..batch, sizes differing by at most one."""
    sizes = [batch // parts + (i < batch % parts) for i in range(parts)]
    edges = list(itertools.accumulate(sizes, initial=0))
    return [(a, b) for a, b in itertools.pairwise(edges) if b > a]


_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _workers() -> ThreadPoolExecutor:
    """Threads that run slices (kept alive: their per-thread kernel scratch is reused)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                from edgecnn.kernels.cpu.system.threads import max_threads

                _pool = ThreadPoolExecutor(max(1, max_threads() - 1), thread_name_prefix="edgecnn-batch")
    return _pool


def _single_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` with one numba thread on the calling thread (numba's setting is per thread)."""
    import numba

    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        return fn()
    finally:
        numba.set_num_threads(previous)


def run_split(
    feeds: Mapping[str, np.ndarray],
    parts: int,
    outputs: Mapping[str, tuple[tuple[int, ...], str]],
    run_slice: Callable[[dict[str, np.ndarray], dict[str, np.ndarray]], object],
) -> dict[str, np.ndarray]:
    """Cut every feed into ``parts`` slices along axis 0, run ``run_slice(slice_feeds, into)`` for
    each on its own thread (the calling thread takes the first), where ``into`` holds the matching
    slices of the whole batch's ``outputs`` ({name: (shape, dtype)}), and return those outputs."""
    batch = next(iter(feeds.values())).shape[0]
    results = {name: np.empty(shape, dtype) for name, (shape, dtype) in outputs.items()}
    bounds = slice_bounds(batch, parts)
    jobs = []
    for lo, hi in bounds:
        slice_feeds = {name: value[lo:hi] for name, value in feeds.items()}
        into = {name: array[lo:hi] for name, array in results.items()}
        jobs.append((slice_feeds, into))
    pending: Sequence[Future[Any]] = [
        _workers().submit(_single_thread, functools.partial(run_slice, *job)) for job in jobs[1:]
    ]
    try:
        _single_thread(lambda: run_slice(*jobs[0]))
    finally:
        for future in pending:
            future.result()  # re-raises a slice's error
    return results


def split_pays(plan: Program | Plan, batch: int, threads: int) -> bool:
    """The "auto" rule (docs/memory.md): split a batch unless its images are tiny or its dense
    layers' weights are large (every slice streams them again, where the whole batch reads them
    once); thresholds from the active CPU tuning record. Convolution-heavy models gain: layers
    below the thread grain run on one thread when the batch is whole, and each slice's working set
    is smaller."""
    from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning

    tuning = active_cpu_tuning()
    dense_bytes = 0
    for step in plan.steps:
        node = step.node
        if op_family(node.op) in ("Gemm", "MatMul"):
            dense_bytes += sum(plan.constants[x].nbytes for x in node.inputs[1:2] if x in plan.constants)
    return (
        plan_macs(plan) >= tuning.split_min_macs_per_image * batch
        and dense_bytes <= tuning.split_max_dense_weight_bytes
    )


def batch_parts(
    program: Program,
    input_types: Mapping[str, TensorType],
    wanted: tuple[str, ...],
    options: RuntimeOptions,
    threads: int,
) -> int:
    """Slices to cut the batch into (1: run it whole, with intra-op threads), by the options'
    policy: the model must never mix a batch's images (``batch_separable``), and under "auto" the
    split must pay (``split_pays``)."""
    policy = options.batch_parallel
    budget = options.threads if policy == "always" else threads
    if policy == "never" or budget < 2 or not input_types:
        return 1
    sizes = {t.dims[0] if t.shape else 0 for t in input_types.values()}
    batch = sizes.pop() if len(sizes) == 1 else 0
    if batch < 2 or any(name in program.constants for name in wanted):
        return 1
    if not batch_separable(program, batch):
        return 1
    if policy == "auto" and not split_pays(program, batch, budget):
        return 1
    return min(budget, batch)
