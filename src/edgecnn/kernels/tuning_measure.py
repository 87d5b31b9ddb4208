"""Measuring the candidate kernels of a layer, and of every layer of a plan (`edgecnn tune`).

Each candidate is prepared as the plan would prepare it (weights packed), called once to warm up
(compilation, caches, scratch buffers), then timed; the fastest wins. Inputs that are not
constants get seeded random values of their planned type.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.registry import KernelEntry, candidate_kernels
from edgecnn.kernels.tuning import TunedChoice, layer_key
from edgecnn.ops.fused import residual_conv_node

Step = tuple[Node, Sequence[TensorType | None], Sequence[np.ndarray | None]]


@dataclass(frozen=True)
class LayerTiming:
    """One layer's candidates with their times, the measured winner, and what the heuristics pick."""

    layer: str
    op: str
    key: str
    times_ms: Mapping[str, float]
    default: str

    @property
    def winner(self) -> str:
        return min(self.times_ms, key=self.times_ms.__getitem__)

    @property
    def speedup(self) -> float:
        """The heuristic choice's time over the winner's (1.0: the heuristic was right)."""
        return self.times_ms[self.default] / max(self.times_ms[self.winner], 1e-9)

    def choice(self) -> TunedChoice:
        return TunedChoice(self.winner, dict(self.times_ms))


def example_inputs(
    types: Sequence[TensorType | None], values: Sequence[np.ndarray | None], seed: int = 0
) -> list[np.ndarray | None]:
    """The constant inputs as they are, the others random (standard normal floats, zeros otherwise)."""
    rng = np.random.default_rng(seed)
    inputs: list[np.ndarray | None] = []
    for t, value in zip(types, values):
        if value is not None or t is None:
            inputs.append(value)
        elif t.shape is None or not t.is_concrete:
            raise ValueError(f"cannot make an example input of unknown shape ({t})")
        else:
            shape = t.dims
            dtype = np.dtype(t.dtype)
            if np.issubdtype(dtype, np.floating):
                inputs.append(rng.standard_normal(shape).astype(dtype))
            else:
                inputs.append(np.zeros(shape, dtype=dtype))
    return inputs


def time_kernel(
    entry: KernelEntry,
    node: Node,
    types: Sequence[TensorType | None],
    values: Sequence[np.ndarray | None],
    inputs: Sequence[np.ndarray | None],
    repeats: int = 1,
) -> float:
    """Milliseconds of one call of the prepared kernel (the best of ``repeats``), after a warm-up call.

    The caller sets the thread budget (``cpu_threads``)."""
    run = entry.factory(node, types, values)
    run(*inputs)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run(*inputs)
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def heuristic_choice(entries: Sequence[KernelEntry], node: Node, types: Sequence, values: Sequence) -> str:
    """The kernel the priority order picks without a tuning cache."""
    for entry in entries:
        if entry.when is None or entry.when(node, types, values):
            return entry.name
    return "reference"


def kernel_choosing_part(node: Node, types: Sequence, values: Sequence) -> Step:
    """The node whose kernel choice decides this step's speed: a FusedConvAdd runs the kernel chosen
    for its convolution alone (kernels/cpu/conv/residual.py), so that convolution is what gets tuned."""
    if node.op == "FusedConvAdd":
        inner = residual_conv_node(node)
        count = len(inner.inputs)
        return inner, types[:count], values[:count]
    return node, types, values


def time_layer(
    node: Node,
    types: Sequence[TensorType | None],
    values: Sequence[np.ndarray | None],
    threads: int,
    device_kind: str = "cpu",
    repeats: int = 1,
) -> LayerTiming | None:
    """Every candidate kernel of the layer timed, or None if fewer than two can run it."""
    node, types, values = kernel_choosing_part(node, types, values)
    entries = candidate_kernels(node, types, values, device_kind)
    if len(entries) < 2:
        return None
    inputs = example_inputs(types, values)
    times = {e.name: time_kernel(e, node, types, values, inputs, repeats) for e in entries}
    return LayerTiming(
        layer=node.name,
        op=node.op,
        key=layer_key(node, types, values, device_kind, threads),
        times_ms=times,
        default=heuristic_choice(entries, node, types, values),
    )


def tunable_layers(steps: Sequence[Step], device_kind: str = "cpu") -> list[int]:
    """Indices of the steps with more than one candidate kernel."""
    parts = [kernel_choosing_part(*step) for step in steps]
    return [i for i, (n, t, v) in enumerate(parts) if len(candidate_kernels(n, t, v, device_kind)) > 1]


def time_layers(
    steps: Sequence[Step],
    threads: int,
    device_kind: str = "cpu",
    repeats: int = 1,
    on_layer: Callable[[LayerTiming | None], None] | None = None,
) -> list[LayerTiming]:
    """``time_layer`` for each step under a ``threads`` budget; layers with one candidate are skipped.

    ``on_layer`` is called after every step (e.g. to advance a progress bar)."""
    from edgecnn.kernels.cpu import cpu_threads

    results = []
    with cpu_threads(threads):
        for node, types, values in steps:
            timing = time_layer(node, types, values, threads, device_kind, repeats)
            if timing is not None:
                results.append(timing)
            if on_layer is not None:
                on_layer(timing)
    return results
