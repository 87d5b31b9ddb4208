"""Per-layer forward and backward times of a training iteration, like `caffe time`: each timed
iteration is one forward pass, the loss, and one backward pass (no weight update)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from edgecnn.errors import InputError
from edgecnn.ir.graph import Graph, Node
from edgecnn.train.loss import softmax_cross_entropy
from edgecnn.train.network import Network
from edgecnn.train.registry import Context


class NodeTimer:
    """NodeHook that sums each node's forward and backward seconds."""

    def __init__(self) -> None:
        self.seconds: dict[tuple[str, str], float] = {}
        self._start = 0.0

    def before(self, node: Node, phase: str) -> None:
        self._start = time.perf_counter()

    def after(self, node: Node, phase: str) -> None:
        key = (node.name, phase)
        self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - self._start


@dataclass(frozen=True)
class LayerPassTimes:
    name: str
    op: str
    forward_ms: float  # mean per iteration
    backward_ms: float


@dataclass(frozen=True)
class TrainingProfile:
    layers: list[LayerPassTimes]
    forward_ms: list[float] = field(default_factory=list)  # per iteration, loss included
    backward_ms: list[float] = field(default_factory=list)

    @property
    def mean_forward_ms(self) -> float:
        return statistics.fmean(self.forward_ms)

    @property
    def mean_backward_ms(self) -> float:
        return statistics.fmean(self.backward_ms)

    @property
    def mean_forward_backward_ms(self) -> float:
        return self.mean_forward_ms + self.mean_backward_ms

    def to_dict(self) -> dict[str, object]:
        return {
            "layers": [
                {"name": t.name, "op": t.op, "forward_ms": t.forward_ms, "backward_ms": t.backward_ms}
                for t in self.layers
            ],
            "forward_ms": self.forward_ms,
            "backward_ms": self.backward_ms,
            "mean_forward_ms": self.mean_forward_ms,
            "mean_backward_ms": self.mean_backward_ms,
            "mean_forward_backward_ms": self.mean_forward_backward_ms,
        }


def profile_training(
    graph: Graph,
    x: np.ndarray,
    iterations: int = 10,
    warmup: int = 2,
    seed: int = 0,
    on_iteration: Callable[[], None] | None = None,
) -> TrainingProfile:
    """Time ``iterations`` forward-backward passes on the batch ``x`` with random labels after
    ``warmup`` untimed ones. The loss (softmax cross-entropy and its gradient) is its own row."""
    if iterations < 1 or warmup < 0:
        raise InputError(f"iterations must be >= 1 and warmup >= 0, got {iterations}, {warmup}")
    network = Network(graph)
    network.check_input(x)
    rng = np.random.default_rng(seed)
    timer = NodeTimer()
    loss_seconds = 0.0
    forward_ms: list[float] = []
    backward_ms: list[float] = []
    labels: np.ndarray | None = None
    for index in range(warmup + iterations):
        timed = index >= warmup
        hooks = (timer,) if timed else ()
        ctx = Context(True, rng)
        start = time.perf_counter()
        logits, tape = network.forward(x, ctx, hooks)
        loss_start = time.perf_counter()
        if labels is None:
            labels = np.asarray(rng.integers(0, logits.shape[1], size=logits.shape[0]))
        _, dlogits = softmax_cross_entropy(logits.reshape(logits.shape[0], -1), labels)
        middle = time.perf_counter()
        network.backward(tape, dlogits.reshape(logits.shape), hooks)
        end = time.perf_counter()
        if timed:
            loss_seconds += middle - loss_start
            forward_ms.append((middle - start) * 1e3)
            backward_ms.append((end - middle) * 1e3)
        if on_iteration is not None:
            on_iteration()
    rows = [
        LayerPassTimes(
            node.name,
            node.op,
            timer.seconds.get((node.name, "forward"), 0.0) * 1e3 / iterations,
            timer.seconds.get((node.name, "backward"), 0.0) * 1e3 / iterations,
        )
        for node in network.nodes
    ]
    rows.append(LayerPassTimes("loss", "SoftmaxCrossEntropy", loss_seconds * 1e3 / iterations, 0.0))
    return TrainingProfile(rows, forward_ms, backward_ms)
