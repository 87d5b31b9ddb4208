"""Seed 003's radar example end to end: simulate labelled returns of the ten target classes, train the
patent's network with edgecnn's trainer, write it in the seed's binary format, load that file back,
score it on held-out returns (accuracy, confusion matrix PNG) and classify many returns on every core.
``edgecnn demo --radar`` runs it (docs/radar.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from edgecnn.errors import InputError
from edgecnn.importers.radar import load_radar, save_radar
from edgecnn.model import Model
from edgecnn.radar.classifier import TRAINING, Evaluation, evaluate, train_classifier
from edgecnn.radar.figure import confusion_png
from edgecnn.radar.simulate import RadarSettings, simulate_returns
from edgecnn.radar.throughput import Throughput, measure_throughput, usable_cores
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.train import EpochStats
from edgecnn.train.trainer import BatchCallback

MODEL_FILE = "radar-hrrp.bin"
FIGURE_FILE = "radar-confusion.png"


@dataclass(frozen=True)
class ExampleSettings:
    seed: int = 0
    train_per_class: int = 400
    test_per_class: int = 100
    epochs: int = TRAINING.epochs
    throughput_returns: int = 20_000  # classified on 1 core and on all of them
    radar: RadarSettings = field(default_factory=RadarSettings)

    def __post_init__(self) -> None:
        counts = (self.train_per_class, self.test_per_class, self.throughput_returns)
        if self.seed < 0 or self.epochs < 0 or min(counts) < 1:
            raise InputError(f"example settings {self}: need seed >= 0, epochs >= 0 and counts >= 1")


@dataclass(frozen=True)
class ExampleReport:
    model_path: Path
    figure_path: Path
    training: list[EpochStats]
    evaluation: Evaluation
    throughput: list[Throughput]


@dataclass(frozen=True)
class ExampleHooks:
    """Progress callbacks: a stage starts (its name, and its number of steps), a training batch or
    epoch ends, a timed throughput run ends."""

    on_stage: Callable[[str, int], None] = lambda name, steps: None
    on_batch: BatchCallback | None = None
    on_epoch: Callable[[EpochStats], None] | None = None
    on_run: Callable[[], None] | None = None


def run_example(
    output: Path, settings: ExampleSettings = ExampleSettings(), hooks: ExampleHooks = ExampleHooks()
) -> ExampleReport:
    """Everything above, writing the model and the figure into ``output`` (created if missing).
    Training and test returns come from different seeds: no test return is seen in training."""
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the output directory {output}: {exc.strerror or exc}") from None
    hooks.on_stage("simulating returns", 0)
    train = simulate_returns(settings.train_per_class, settings.seed, settings.radar, name="radar/train")
    test = simulate_returns(settings.test_per_class, settings.seed + 1, settings.radar, name="radar/held-out")
    hooks.on_stage("training", settings.epochs)
    config = replace(TRAINING, epochs=settings.epochs, seed=settings.seed)
    trainer = train_classifier(train, test, config, hooks.on_batch, hooks.on_epoch)
    model_path = output / MODEL_FILE
    save_radar(trainer.graph, model_path)
    hooks.on_stage("evaluating the saved model", 0)
    graph = load_radar(model_path)
    evaluation = evaluate(Model(graph, RuntimeOptions.resolve()), test)
    figure_path = output / FIGURE_FILE
    confusion_png(
        evaluation, figure_path, f"held-out accuracy {evaluation.accuracy:.1%} (seed {settings.seed})"
    )
    repeats, cores = 3, tuple(sorted({1, usable_cores()}))
    many = np.resize(test.images, (settings.throughput_returns, *test.images.shape[1:]))
    hooks.on_stage("data-parallel inference", len(cores) * repeats)
    throughput = measure_throughput(graph, many, cores, repeats, hooks.on_run)
    return ExampleReport(model_path, figure_path, trainer.history, evaluation, throughput)
