"""Training runs: the loss falls, a seed fixes every bit, masks hold, checkpoints resume exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from train_helpers import small_lenet, toy_dataset

import edgecnn
from edgecnn.errors import InputError, ModelFormatError
from edgecnn.train.checkpoint import resume, save_checkpoint
from edgecnn.train.trainer import TrainConfig, Trainer, TrainingDivergedError

CONFIG = TrainConfig(epochs=6, batch_size=16, lr=0.02, schedule="cosine", seed=5)


def weights(trainer: Trainer) -> dict[str, np.ndarray]:
    return {name: trainer.network.values[name].copy() for name in trainer.network.parameters}


def test_short_training_lowers_the_loss_and_learns() -> None:
    data = toy_dataset()
    trainer = Trainer(small_lenet(), CONFIG)
    before, _ = trainer.evaluate(data)
    history = trainer.fit(data, val=data)
    after, accuracy = trainer.evaluate(data)
    assert after < before * 0.5
    assert history[-1].loss < history[0].loss
    assert accuracy > 0.9
    assert [h.epoch for h in history] == [1, 2, 3, 4, 5, 6]
    model = edgecnn.Model(trainer.graph)  # the trained graph runs on the inference engine
    predicted = model(data.images).argmax(axis=1)
    assert np.mean(predicted == data.labels) == pytest.approx(accuracy)


def test_same_seed_same_bits_other_seed_other_weights() -> None:
    data = toy_dataset()
    runs = []
    for seed in (5, 5, 6):
        trainer = Trainer(small_lenet(), TrainConfig(**{**CONFIG.__dict__, "seed": seed, "shift": 1}))
        trainer.fit(data)
        runs.append(weights(trainer))
    for name in runs[0]:
        assert np.array_equal(runs[0][name], runs[1][name])
    assert any(not np.array_equal(runs[0][n], runs[2][n]) for n in runs[0])


def test_masks_keep_pruned_weights_at_zero() -> None:
    data = toy_dataset()
    trainer = Trainer(small_lenet(), CONFIG)
    mask = np.random.default_rng(0).random(trainer.network.values["ip1.w"].shape) < 0.3
    trainer.set_masks({"ip1.w": mask})
    trainer.fit(data, epochs=1)
    trainer.train_steps(data, 5, lr=0.01, stream=0)
    w = trainer.network.values["ip1.w"]
    assert np.all(w[~mask] == 0) and np.count_nonzero(w[mask]) == mask.sum()
    with pytest.raises(InputError, match="shape"):
        trainer.set_masks({"ip1.w": mask[:1]})
    with pytest.raises(InputError, match="not a trainable parameter"):
        trainer.set_masks({"nope": mask})


def test_checkpoint_resumes_bit_identically(tmp_path: Path) -> None:
    data = toy_dataset()
    straight = Trainer(small_lenet(), CONFIG)
    straight.fit(data)
    first = Trainer(small_lenet(), CONFIG)
    first.set_masks({"conv2.w": np.abs(first.network.values["conv2.w"]) > 0.05})
    first.fit(data, epochs=1)
    path = tmp_path / "epoch1.ecnn"
    save_checkpoint(first, path)
    assert edgecnn.load(path)(data.images[:2]).shape == (2, 3)  # a checkpoint is also a model
    again = resume(path)
    assert again.epoch == 1 and len(again.history) == 1
    assert set(again.masks) == {"conv2.w"}
    again.fit(data)
    first.fit(data)
    for name, value in weights(first).items():
        assert np.array_equal(value, again.network.values[name]), name
    assert not np.array_equal(weights(straight)["conv2.w"], weights(first)["conv2.w"])  # the mask mattered


def test_resume_refuses_a_plain_model(tmp_path: Path) -> None:
    path = tmp_path / "plain.ecnn"
    edgecnn.Model(small_lenet()).save(path)
    with pytest.raises(ModelFormatError, match="not a training checkpoint"):
        resume(path)


@pytest.mark.filterwarnings(
    "ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning"
)
def test_divergence_is_reported() -> None:
    trainer = Trainer(small_lenet(), TrainConfig(epochs=3, batch_size=16, lr=1e3))
    with pytest.raises(TrainingDivergedError, match="lower the learning rate"):
        trainer.fit(toy_dataset())


def test_data_that_does_not_fit_the_model_is_refused() -> None:
    from edgecnn.train import Dataset

    data = toy_dataset()
    trainer = Trainer(small_lenet(), CONFIG)
    five = Dataset(data.images, data.labels, ("a", "b", "c", "d", "e"), "five")
    with pytest.raises(InputError, match="five has 5 classes but the model outputs"):
        trainer.fit(five)
    with pytest.raises(InputError, match="expects shape"):
        trainer.fit(Dataset(data.images[:, :, :8], data.labels, data.classes))
