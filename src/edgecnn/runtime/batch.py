"""Batch-level parallelism (seed 000: threads = min(threads, batch)): a batch is cut into slices
along axis 0 that run side by side, each on one kernel thread, instead of every layer splitting its
own work over the threads.

Only for models that never mix the images of a batch: every tensor keeps the batch on axis 0 and
every step is one of the ops below, with attributes that leave axis 0 alone (``batch_separable``).
Numba's kernels are then called from several Python threads at once, which its ``workqueue``
threading layer does not allow: only ``omp`` and ``tbb`` qualify (``threading_layer_is_safe``).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from edgecnn.ir.graph import TensorType
from edgecnn.ops.common import normalize_axis
from edgecnn.runtime.plan import Plan, Step
from edgecnn.runtime.serial import plan_macs

PER_SAMPLE_OPS = frozenset(
    {
        "Conv", "FusedConv", "ConvTranspose", "MaxPool", "AveragePool", "FusedMaxPool", "FusedAveragePool",
        "GlobalAveragePool", "GlobalMaxPool", "LRN", "BatchNormalization", "InstanceNormalization", "Relu",
        "LeakyRelu", "PRelu", "Elu", "Celu", "Selu", "ThresholdedRelu", "HardSigmoid", "HardSwish",
        "Sigmoid", "Tanh", "Gelu", "Clip", "Identity", "Dropout", "Cast", "Sqrt", "Exp", "Log", "Neg",
        "Abs", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Erf", "Add", "Sub", "Mul", "Div", "Pow",
        "Max", "Min", "Sum", "Mean", "Reshape", "Squeeze", "DepthToSpace", "SpaceToDepth",
    }
)  # fmt: skip
"""Ops that treat every image alone once axis 0 is the batch in all their inputs and outputs
(broadcast constants excepted, see ``_constants_broadcast``)."""

AXIS_OPS = frozenset({"Concat", "Split", "Softmax", "LogSoftmax", "Hardmax", "ArgMax", "ArgMin", "Gather"})
"""Ops that are per image when their ``axis`` attribute is not the batch axis."""


def _shape(plan: Plan, name: str) -> tuple[int, ...] | None:
    t: TensorType | None = plan.types.get(name)
    if t is None or not t.is_concrete:
        return None
    return tuple(int(d) for d in t.shape)  # type: ignore[union-attr, arg-type]


def _constants_broadcast(plan: Plan, step: Step, rank: int) -> bool:
    """Constant operands of a broadcasting op must not vary along the batch axis."""
    for name in step.node.inputs:
        if name and name in plan.constants:
            value = plan.constants[name]
            if value.ndim == rank and value.shape[0] != 1:
                return False
    return True


def _step_separable(plan: Plan, step: Step) -> bool:
    node, attrs = step.node, step.node.attrs
    out = _shape(plan, node.outputs[0]) if node.outputs and node.outputs[0] else None
    if out is None:
        return False
    rank = len(out)
    if node.op in ("Conv", "FusedConv", "ConvTranspose"):
        return True  # the constants are filters, not operands broadcast against the images
    if node.op == "FusedConvAdd":  # filters, and a residual sliced like every image tensor
        return node.inputs[3] not in plan.constants
    if node.op in PER_SAMPLE_OPS:
        return _constants_broadcast(plan, step, rank)
    if node.op in ("Gemm", "FusedGemm"):
        c = node.inputs[2] if len(node.inputs) > 2 else ""
        row_varying = c in plan.constants and plan.constants[c].ndim == 2 and plan.constants[c].shape[0] != 1
        return not getattr(attrs, "trans_a", False) and not row_varying
    if node.op == "MatMul":
        b = node.inputs[1]
        return b in plan.constants and plan.constants[b].ndim <= 2
    if node.op == "Flatten":
        x = _shape(plan, node.inputs[0])
        return bool(x) and normalize_axis(getattr(attrs, "axis", 1), len(x)) >= 1  # type: ignore[arg-type]
    if node.op == "Transpose":
        perm = tuple(getattr(attrs, "perm", ()))
        return bool(perm) and perm[0] == 0
    if node.op == "Unsqueeze":
        return True  # a new axis 0 would make the output's axis 0 differ from the batch (checked)
    if node.op in AXIS_OPS:
        x = _shape(plan, node.inputs[0])
        if x is None or not hasattr(attrs, "axis"):
            return False
        if node.op == "Gather" and node.inputs[1] not in plan.constants:
            return False
        if getattr(attrs, "coerce_2d", False):
            return normalize_axis(attrs.axis, len(x)) >= 1
        return normalize_axis(attrs.axis, len(x)) != 0
    return False


def batch_separable(plan: Plan, batch: int) -> bool:
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
        _workers().submit(_single_thread, lambda job=job: run_slice(*job)) for job in jobs[1:]
    ]
    try:
        _single_thread(lambda: run_slice(*jobs[0]))
    finally:
        for future in pending:
            future.result()  # re-raises a slice's error
    return results


SPLIT_MIN_MACS_PER_IMAGE = 20_000_000
"""Below this much work per image, handing a slice to another thread costs more than it saves
(LeNet-5, 0.3 MMAC: 0.56x at batch 2)."""

SPLIT_MAX_DENSE_WEIGHT_BYTES = 16 << 20
"""Above this many bytes of fully-connected weights, splitting loses: every slice streams the
weights again, where the whole batch reads them once (AlexNet 0.79x, VGG-16 0.85x at batch 8)."""


def split_pays(plan: Plan, batch: int, threads: int) -> bool:
    """The "auto" rule, from benchmarks/arena.py --batch-only (docs/memory.md): split a batch
    unless its images are tiny or its dense layers' weights are large. Convolution-heavy models
    gained 1.0-1.18x at batch 2-8 on 2 threads: layers below the thread grain run on one thread
    when the batch is whole, and each slice's working set is smaller."""
    dense_bytes = 0
    for step in plan.steps:
        node = step.node
        if node.op in ("Gemm", "FusedGemm", "MatMul"):
            dense_bytes += sum(plan.constants[x].nbytes for x in node.inputs[1:2] if x in plan.constants)
    return plan_macs(plan) >= SPLIT_MIN_MACS_PER_IMAGE * batch and dense_bytes <= SPLIT_MAX_DENSE_WEIGHT_BYTES
