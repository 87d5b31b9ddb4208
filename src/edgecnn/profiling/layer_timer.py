"""LayerTimer: an executor hook that records each step's wall time (the `caffe time` view)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from edgecnn.devices import DeviceTensor
from edgecnn.runtime.plan import Step


@dataclass(frozen=True)
class LayerTiming:
    name: str
    op: str
    kernel: str
    mean_ms: float
    min_ms: float
    share: float  # fraction of the summed per-layer mean time


@dataclass
class Profile:
    """Timings of ``iterations`` runs after warm-up: per layer and per whole forward pass."""

    layers: list[LayerTiming]
    iteration_ms: list[float]

    @property
    def mean_ms(self) -> float:
        return float(np.mean(self.iteration_ms)) if self.iteration_ms else 0.0

    @property
    def min_ms(self) -> float:
        return float(np.min(self.iteration_ms)) if self.iteration_ms else 0.0

    @property
    def median_ms(self) -> float:
        return float(np.median(self.iteration_ms)) if self.iteration_ms else 0.0

    @property
    def total_ms(self) -> float:
        return float(np.sum(self.iteration_ms))

    def to_dict(self) -> dict[str, object]:
        return {
            "iterations": len(self.iteration_ms),
            "iteration_ms": self.iteration_ms,
            "mean_ms": self.mean_ms,
            "median_ms": self.median_ms,
            "min_ms": self.min_ms,
            "total_ms": self.total_ms,
            "layers": [vars(layer) for layer in self.layers],
        }


@dataclass
class LayerTimer:
    """Hook collecting per-step durations across runs, keyed by step position."""

    samples: dict[int, list[float]] = field(default_factory=dict)
    _steps: dict[int, Step] = field(default_factory=dict)
    _started: float = 0.0

    def before(self, step: Step) -> None:
        self._started = time.perf_counter()

    def after(self, step: Step, outputs: tuple[np.ndarray, ...]) -> None:
        for output in outputs:  # device launches are asynchronous: time them to completion
            if isinstance(output, DeviceTensor):
                output.wait()
        elapsed = (time.perf_counter() - self._started) * 1e3
        key = id(step)
        self._steps[key] = step
        self.samples.setdefault(key, []).append(elapsed)

    def layers(self) -> list[LayerTiming]:
        means = {key: float(np.mean(v)) for key, v in self.samples.items()}
        total = sum(means.values()) or 1.0
        return [
            LayerTiming(
                name=step.node.name,
                op=step.node.op,
                kernel=step.kernel.name,
                mean_ms=means[key],
                min_ms=float(np.min(self.samples[key])),
                share=means[key] / total,
            )
            for key, step in self._steps.items()
        ]
