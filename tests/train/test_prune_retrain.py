"""Prune-retrain along a falling retention schedule, and structured (filter/neuron) pruning."""

from __future__ import annotations

import numpy as np
import pytest
from train_helpers import small_lenet, toy_dataset

from edgecnn.compress import density
from edgecnn.compress.retrain import prune_retrain, retention_schedule
from edgecnn.compress.structured import kept_units, prune_structured
from edgecnn.errors import GraphError, InputError
from edgecnn.model import Model
from edgecnn.train.trainer import TrainConfig, Trainer


def test_retention_schedule_matches_the_seed() -> None:
    assert retention_schedule(0.1) == pytest.approx([0.95 - 0.05 * i for i in range(18)])
    assert retention_schedule(0.05)[-2:] == pytest.approx([0.1, 0.05])
    assert retention_schedule(0.97) == [0.97]
    assert retention_schedule(0.3, step=0.25) == pytest.approx([0.95, 0.7, 0.45, 0.3])
    with pytest.raises(InputError):
        retention_schedule(1.5)


def test_prune_retrain_reaches_the_targets_with_masks_held() -> None:
    data = toy_dataset()
    trainer = Trainer(small_lenet(), TrainConfig(epochs=4, batch_size=16, lr=0.02, seed=1))
    trainer.fit(data)
    calls: list[int] = []
    stages = prune_retrain(
        trainer,
        data,
        layers={"ip1": 0.1, "conv2.w": 0.5},
        steps=8,
        final_steps=6,
        lr=0.01,
        step=0.3,
        val=data,
        on_batch=lambda index, total, loss: calls.append(total),
    )
    assert calls == [8] * 32 + [6] * 6  # 4 cuts x 8 steps, then 6 annealed steps
    assert [s.keeps["ip1"] for s in stages] == pytest.approx([0.95, 0.65, 0.35, 0.1])
    assert [s.keeps["conv2"] for s in stages] == pytest.approx([0.95, 0.65, 0.5, 0.5])
    values = trainer.network.values
    assert density(values["ip1.w"]) == pytest.approx(0.1, abs=1 / values["ip1.w"].size)
    assert density(values["conv2.w"]) == pytest.approx(0.5, abs=1 / values["conv2.w"].size)
    assert density(values["conv1.w"]) == 1.0
    final = stages[-1]
    assert final.accuracy is not None and final.pruned_accuracy is not None
    assert final.accuracy >= final.pruned_accuracy  # retraining recovers what the last cut lost
    assert all(np.isfinite(s.loss) for s in stages)
    with pytest.raises(InputError, match="no prunable layer"):
        prune_retrain(trainer, data, layers={"nope": 0.5})


def _zero(graph, name: str, index, axis: int):  # type: ignore[no-untyped-def]
    copy = graph.copy()
    w = np.array(copy.initializers[name])
    np.moveaxis(w, axis, 0)[index] = 0
    copy.initializers[name] = w
    return copy


def test_structured_pruning_equals_zeroing_the_readers_inputs() -> None:
    graph = small_lenet(seed=3)
    x = np.random.default_rng(0).random((5, 1, 16, 16), dtype=np.float32)
    smaller, units = prune_structured(graph, layers={"conv1": 0.5, "conv2": 0.5, "ip1": 0.25})
    assert units == {"conv1": (4, 2), "conv2": (6, 3), "ip1": (16, 4)}
    w = smaller.initializers
    assert w["conv1.w"].shape == (2, 1, 5, 5) and w["conv1.b"].shape == (2,)
    assert w["conv2.w"].shape == (3, 2, 5, 5)
    assert w["ip1.w"].shape == (4, 3) and w["ip2.w"].shape == (3, 4)
    # The same model with the removed units' outgoing weights zeroed computes the same function.
    reference = graph
    for node, reader, axis, spatial in (
        ("conv1", "conv2.w", 1, 1),
        ("conv2", "ip1.w", 1, 1),
        ("ip1", "ip2.w", 1, 1),
    ):
        tensor = f"{node}.w"
        gone = np.setdiff1d(
            np.arange(graph.initializers[tensor].shape[0]),
            kept_units(graph.initializers[tensor], 0, 0.5 if node != "ip1" else 0.25),
        )
        reference = _zero(reference, reader, (gone[:, None] * spatial + np.arange(spatial)).reshape(-1), axis)
    np.testing.assert_allclose(Model(smaller)(x), Model(reference)(x), rtol=1e-5, atol=1e-6)


def test_structured_pruning_refuses_what_it_cannot_follow() -> None:
    graph = small_lenet()
    with pytest.raises(GraphError, match="cannot remove units of ip2"):
        prune_structured(graph, layers={"ip2": 0.5})
    assert graph.initializers["ip2.w"].shape == (3, 16)  # untouched
    same, units = prune_structured(graph, layers={"conv1": 1.0})
    assert units == {} and same.initializers["conv1.w"].shape == (4, 1, 5, 5)


def test_sensitivity_scan_with_real_accuracy_and_its_chart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from PIL import Image

    from edgecnn.compress import prune, sensitivity
    from edgecnn.compress.charts import draw_sensitivity
    from edgecnn.train.evaluate import accuracy_score, engine_accuracy

    data = toy_dataset()
    trainer = Trainer(small_lenet(), TrainConfig(epochs=4, batch_size=16, lr=0.02, seed=1))
    trainer.fit(data)
    dense = engine_accuracy(trainer.graph, data)
    assert dense == pytest.approx(trainer.evaluate(data)[1])
    points = sensitivity(trainer.graph, accuracy_score(data), layers=["conv1", "ip1"], keeps=(0.9, 0.5, 0.05))
    assert [(p.layer, p.keep) for p in points][:3] == [("conv1", 0.9), ("conv1", 0.5), ("conv1", 0.05)]
    by_point = {(p.layer, p.keep): p.score for p in points}
    expected = engine_accuracy(prune(trainer.graph, layers={"ip1": 0.05}), data)
    assert by_point[("ip1", 0.05)] == expected and 0.0 <= expected <= 1.0
    path = tmp_path / "chart.png"
    draw_sensitivity(points, path, "toy", baseline=dense)
    with Image.open(path) as image:
        assert image.size == (900, 560) and len(np.unique(np.asarray(image).reshape(-1, 3), axis=0)) > 5
    with pytest.raises(ValueError, match="no sensitivity points"):
        draw_sensitivity([], path, "empty")


def test_engine_accuracy_follows_a_fixed_batch_size() -> None:
    from dataclasses import replace

    from edgecnn.train.evaluate import engine_accuracy

    graph = small_lenet()
    graph.inputs = [replace(graph.inputs[0], shape=(1, 1, 16, 16))]
    data = toy_dataset(n=9)
    expected = np.mean(Model(small_lenet())(data.images).argmax(axis=1) == data.labels)
    assert engine_accuracy(graph, data) == pytest.approx(expected)
