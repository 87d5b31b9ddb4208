"""Training the radar network (edgecnn's trainer, 1-D layers), writing it in the seed-003 format,
scoring it from the file, the confusion matrix and its PNG, the data-parallel throughput."""

from __future__ import annotations

import builtins
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from edgecnn.errors import ConfigurationError, InputError
from edgecnn.importers.radar import load_radar, radar_layers, save_radar
from edgecnn.model import Model
from edgecnn.radar import (
    PATENT_LAYERS,
    TRAINING,
    Evaluation,
    classify_all,
    confusion_matrix,
    evaluate,
    measure_throughput,
    simulate_returns,
    train_classifier,
    untrained_network,
)
from edgecnn.radar.figure import confusion_png
from edgecnn.runtime.options import RuntimeOptions


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Evaluation]:
    """A short training run (80 returns per class, 6 epochs), saved and scored from the file."""
    train, test = simulate_returns(80, seed=10), simulate_returns(20, seed=11)
    trainer = train_classifier(train, config=replace(TRAINING, epochs=6, seed=2))
    path = tmp_path_factory.mktemp("radar") / "model.bin"
    save_radar(trainer.graph, path)
    model = Model(load_radar(path), RuntimeOptions.resolve(threads=1))
    in_memory = Model(trainer.graph, RuntimeOptions.resolve(threads=1))
    np.testing.assert_array_equal(
        np.asarray(model(test.images)).argmax(1), np.asarray(in_memory(test.images)).argmax(1)
    )
    return path, evaluate(model, test)


def test_untrained_network_is_the_patents() -> None:
    layers, params = radar_layers(untrained_network(seed=1))
    assert tuple(layers) == PATENT_LAYERS
    assert [p.weights.shape for p in params] == [(6, 1, 5), (12, 6, 5), (384, 50), (50, 10)]


def test_training_learns_far_above_chance(trained: tuple[Path, Evaluation]) -> None:
    path, evaluation = trained
    assert path.stat().st_size == 80_788  # the patent's network: 29 header words, 20,168 floats
    assert evaluation.confusion.sum() == 200
    assert evaluation.accuracy > 0.5  # chance is 0.1; this seed gives 0.765 here


def test_confusion_matrix_and_scores() -> None:
    matrix = confusion_matrix(np.array([0, 0, 1, 2, 2, 2]), np.array([0, 1, 1, 2, 2, 0]), 3)
    assert matrix.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 2]]
    evaluation = Evaluation(("a", "b", "c"), matrix)
    assert evaluation.accuracy == pytest.approx(4 / 6)
    np.testing.assert_allclose(evaluation.recall(), [0.5, 1.0, 2 / 3])


def test_confusion_png(trained: tuple[Path, Evaluation], tmp_path: Path) -> None:
    target = tmp_path / "confusion.png"
    confusion_png(trained[1], target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["confusion.png"]  # no temporary left


def test_confusion_png_without_matplotlib(
    trained: tuple[Path, Evaluation], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(ConfigurationError, match=r"edgecnn\[plot\]"):
        confusion_png(trained[1], tmp_path / "c.png")


def test_data_parallel_inference(trained: tuple[Path, Evaluation]) -> None:
    """Two cores classify exactly as one does, through the batch split (one slice per core)."""
    graph = load_radar(trained[0])
    returns = simulate_returns(30, seed=12).images
    one, two = (Model(graph, RuntimeOptions.resolve(threads=t, batch_parallel="always")) for t in (1, 2))
    np.testing.assert_array_equal(
        classify_all(one, returns, chunk=128), classify_all(two, returns, chunk=128)
    )
    assert two.plan_for({"input": returns[:128]}).split is not None
    results = measure_throughput(graph, returns, (1, 2), repeats=1)
    assert [r.cores for r in results] == [1, 2]
    assert all(r.returns == 300 and r.per_core == pytest.approx(r.per_second / r.cores) for r in results)
    with pytest.raises(InputError, match="no returns"):
        measure_throughput(graph, returns[:0])
