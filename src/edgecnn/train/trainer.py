"""Mini-batch training of a classifier Graph: seeded (same seed, same weights, bit for bit),
scheduled SGD, optional fixed pruning masks, evaluation, and checkpoints that resume exactly."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, TypeVar

import numpy as np
from threadpoolctl import threadpool_limits

from edgecnn.errors import EdgeCNNError, InputError
from edgecnn.ir.graph import Graph
from edgecnn.ops.traits import weight_of
from edgecnn.train.data.dataset import Dataset
from edgecnn.train.loss import softmax_cross_entropy
from edgecnn.train.network import Network
from edgecnn.train.optim import SGD, Schedule
from edgecnn.train.registry import Context

RETRAIN_STREAM = 1 << 20
"""Random streams of retraining rounds start here, apart from the per-epoch streams."""


class TrainingDivergedError(EdgeCNNError):
    """The loss became NaN or infinite: the learning rate is too high for this model."""


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 10
    batch_size: int = 64
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 5e-4
    schedule: str = "step"  # constant, step or cosine
    step_size: int = 5  # epochs between step-schedule decays
    gamma: float = 0.2
    seed: int = 0
    bn_momentum: float = 0.9
    shift: int = 0  # augmentation: translate each training image by up to this many pixels
    threads: int = 1  # BLAS threads; results are bit-identical for a given seed and thread count

    def lr_schedule(self) -> Schedule:
        """The schedule over ``epochs`` (its horizon: cosine reaches its minimum there)."""
        return Schedule(self.schedule, self.lr, self.step_size, self.gamma, max(self.epochs, 1))


@dataclass(frozen=True)
class EpochStats:
    epoch: int  # 1-based
    lr: float  # at the epoch's last step
    loss: float
    accuracy: float
    val_loss: float | None
    val_accuracy: float | None
    seconds: float


BatchCallback = Callable[[int, int, float], None]
"""on_batch(batch index, batches in the epoch, loss)."""


P = ParamSpec("P")
R = TypeVar("R")


def blas_threads(method: Callable[Concatenate[Trainer, P], R]) -> Callable[Concatenate[Trainer, P], R]:
    """Run ``method`` with BLAS limited to the config's thread count: small training GEMMs gain
    little from threads, and oversubscribed cores make them many times slower."""

    @functools.wraps(method)
    def wrapper(self: Trainer, *args: P.args, **kwargs: P.kwargs) -> R:
        with threadpool_limits(self.config.threads):
            return method(self, *args, **kwargs)

    return wrapper


class Trainer:
    """Trains a Graph's float initializers (its Conv/Gemm/MatMul/BatchNorm parameters) in place of a
    copy; ``graph`` returns the current model. Weight decay applies to layer weights only."""

    def __init__(self, graph: Graph, config: TrainConfig | None = None) -> None:
        self.config = config or TrainConfig()
        if self.config.batch_size < 1 or self.config.epochs < 0 or self.config.threads < 1:
            raise InputError(f"batch_size and threads must be >= 1 and epochs >= 0, got {self.config}")
        self.schedule = self.config.lr_schedule()
        self.network = Network(graph)
        weights = {found[0] for node in graph.nodes if (found := weight_of(node, graph.initializers))}
        self.optimizer = SGD(
            self.config.momentum, self.config.weight_decay, weights & set(self.network.parameters)
        )
        self.masks: dict[str, np.ndarray] = {}
        self.epoch = 0
        self.history: list[EpochStats] = []
        self.dtype = (
            self.network.values[self.network.parameters[0]].dtype if self.network.parameters else np.float32
        )

    # ------------------------------------------------------------------ state
    @property
    def graph(self) -> Graph:
        """The model with its current weights (Softmax head included), ready for edgecnn.Model."""
        return self.network.graph()

    def set_masks(self, masks: Mapping[str, np.ndarray]) -> None:
        """Hold these parameters' False entries at exactly zero from now on (replaces earlier masks)."""
        checked: dict[str, np.ndarray] = {}
        for name, mask in masks.items():
            if name not in self.network.parameters:
                raise InputError(f"mask for {name!r}, which is not a trainable parameter of this graph")
            mask = np.asarray(mask, bool)
            if mask.shape != self.network.values[name].shape:
                raise InputError(
                    f"mask for {name!r} has shape {list(mask.shape)}, the parameter {list(self.network.values[name].shape)}"
                )
            checked[name] = mask
            self.network.values[name][~mask] = 0
            velocity = self.optimizer.velocity.get(name)
            if velocity is not None:
                velocity[~mask] = 0
        self.masks = checked

    def check_data(self, data: Dataset) -> None:
        """InputError unless ``data``'s images fit the input and its classes the output."""
        self.network.check_input(data.images[:1])
        if len(data):
            logits, _ = self.network.forward(data.images[:1].astype(self.dtype), Context(training=False))
            if logits.ndim != 2 or logits.shape[1] < len(data.classes):
                raise InputError(
                    f"{data.name} has {len(data.classes)} classes but the model outputs {list(logits.shape)} scores"
                )

    # --------------------------------------------------------------- training
    def step(self, x: np.ndarray, y: np.ndarray, lr: float, rng: np.random.Generator) -> tuple[float, int]:
        """One SGD step on a batch: (mean loss, correct predictions) before the update."""
        if self.config.shift:
            x = random_shift(x, self.config.shift, rng)
        ctx = Context(True, rng, self.config.bn_momentum)
        logits, tape = self.network.forward(x.astype(self.dtype, copy=False), ctx)
        loss, dlogits = softmax_cross_entropy(logits, y)
        if not np.isfinite(loss):
            raise TrainingDivergedError(
                f"training diverged (loss {loss}) in epoch {self.epoch + 1} at lr {lr:g}: lower the learning rate"
            )
        grads = self.network.backward(tape, dlogits)
        self.optimizer.step(self.network.values, grads, lr, self.masks)
        return loss, int((logits.argmax(axis=1) == y).sum())

    @blas_threads
    def fit(
        self,
        train: Dataset,
        val: Dataset | None = None,
        epochs: int | None = None,
        on_batch: BatchCallback | None = None,
        on_epoch: Callable[[EpochStats], None] | None = None,
    ) -> list[EpochStats]:
        """Train from the current epoch up to ``epochs`` (default: the config's). Epoch e shuffles
        and drops out with its own stream (seed, e), so a resumed run repeats an unbroken one."""
        self.check_data(train)
        target = self.config.epochs if epochs is None else epochs
        done: list[EpochStats] = []
        while self.epoch < target:
            start = time.perf_counter()
            rng = np.random.default_rng([self.config.seed, self.epoch])
            total = -(-len(train) // self.config.batch_size)
            loss_sum, correct, lr = 0.0, 0, 0.0
            for index, (x, y) in enumerate(train.batches(self.config.batch_size, rng)):
                lr = self.schedule.at(self.epoch + index / total)
                loss, hits = self.step(x, y, lr, rng)
                loss_sum += loss * len(y)
                correct += hits
                if on_batch is not None:
                    on_batch(index, total, loss)
            self.epoch += 1
            val_loss, val_accuracy = self.evaluate(val) if val is not None else (None, None)
            stats = EpochStats(
                self.epoch,
                lr,
                loss_sum / len(train),
                correct / len(train),
                val_loss,
                val_accuracy,
                time.perf_counter() - start,
            )
            self.history.append(stats)
            done.append(stats)
            if on_epoch is not None:
                on_epoch(stats)
        return done

    @blas_threads
    def train_steps(
        self,
        train: Dataset,
        steps: int,
        lr: float | Callable[[int], float],
        stream: int,
        on_batch: BatchCallback | None = None,
    ) -> float:
        """``steps`` SGD steps over reshuffled passes of ``train`` (retraining after pruning) at a fixed
        ``lr`` or ``lr(step index)``; ``stream`` picks the random stream. Returns the mean loss."""
        self.check_data(train)
        rng = np.random.default_rng([self.config.seed, RETRAIN_STREAM + stream])
        rate = lr if callable(lr) else (lambda _: lr)
        losses: list[float] = []
        while len(losses) < steps:
            for x, y in train.batches(self.config.batch_size, rng):
                losses.append(self.step(x, y, rate(len(losses)), rng)[0])
                if on_batch is not None:
                    on_batch(len(losses) - 1, steps, losses[-1])
                if len(losses) == steps:
                    break
        return float(np.mean(losses)) if losses else float("nan")

    @blas_threads
    def evaluate(self, data: Dataset, batch_size: int = 256) -> tuple[float, float]:
        """(mean loss, accuracy) in inference mode (running BatchNorm statistics, no dropout)."""
        if len(data) == 0:
            raise InputError(f"{data.name}: cannot evaluate on an empty set")
        ctx = Context(training=False)
        loss_sum, correct = 0.0, 0
        for x, y in data.batches(batch_size):
            logits, _ = self.network.forward(x.astype(self.dtype, copy=False), ctx)
            loss_sum += softmax_cross_entropy(logits, y)[0] * len(y)
            correct += int((logits.argmax(axis=1) == y).sum())
        return loss_sum / len(data), correct / len(data)


def random_shift(images: np.ndarray, limit: int, rng: np.random.Generator) -> np.ndarray:
    """Translate every (C, H, W) image (or (C, L) signal, along L) by its own random offset in
    -limit..limit, filling with zeros."""
    if images.ndim == 3:
        length = images.shape[2]
        padded = np.pad(images, ((0, 0), (0, 0), (limit, limit)))
        starts = rng.integers(0, 2 * limit + 1, size=len(images))
        return np.stack([padded[i, :, start : start + length] for i, start in enumerate(starts)])
    n, _, h, w = images.shape
    padded = np.pad(images, ((0, 0), (0, 0), (limit, limit), (limit, limit)))
    offsets = rng.integers(0, 2 * limit + 1, size=(n, 2))
    return np.stack([padded[i, :, dy : dy + h, dx : dx + w] for i, (dy, dx) in enumerate(offsets)])
