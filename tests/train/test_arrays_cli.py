"""`edgecnn train --dataset npz:FILE`: saved arrays, images or 1-D signals (seed 003's radar network)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from edgecnn.cli.app import EXIT_ERROR, app
from edgecnn.errors import InputError
from edgecnn.importers.radar import save_radar
from edgecnn.radar.network import untrained_network
from edgecnn.radar.simulate import simulate_returns
from edgecnn.train.data import load_arrays, load_dataset


def invoke(*args: object) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def radar_files(folder: Path, per_class: int = 40) -> tuple[Path, Path]:
    """An untrained seed-003 network in the seed's format and simulated returns saved as .npz."""
    network = folder / "radar.bin"
    save_radar(untrained_network(seed=0), network)
    returns = simulate_returns(per_class, seed=0)
    arrays = folder / "returns.npz"
    np.savez(arrays, inputs=returns.images, labels=returns.labels, classes=np.array(returns.classes))
    return network, arrays


def test_train_the_radar_network_on_saved_returns(tmp_path: Path) -> None:
    network, arrays = radar_files(tmp_path)
    out = tmp_path / "trained.ecnn"
    result = invoke(
        "train", network, "--dataset", f"npz:{arrays}", "--epochs", "6", "--lr", "0.05",
        "--shift", "0", "--quiet", "-o", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "of 1x150, 10 classes" in result.stdout
    accuracy = float(re.search(r"test accuracy .*?: ([\d.]+)%", result.stdout).group(1))  # type: ignore[union-attr]
    assert accuracy > 25.0  # ten classes: chance is 10%
    assert out.stat().st_size > 0


def test_arrays_that_do_not_fit_the_model_are_refused(tmp_path: Path) -> None:
    network, _ = radar_files(tmp_path, per_class=2)
    arrays = tmp_path / "short.npz"
    np.savez(arrays, inputs=np.zeros((20, 1, 100), np.float32), labels=np.arange(20) % 2)
    result = invoke(
        "train", network, "--dataset", f"npz:{arrays}", "--epochs", "1", "-o", tmp_path / "x.ecnn"
    )
    assert result.exit_code == EXIT_ERROR
    assert "samples are 1x100, the model takes 1x150" in result.output


def test_load_arrays_errors(tmp_path: Path) -> None:
    np.savez(tmp_path / "no_labels.npz", inputs=np.zeros((4, 1, 8)))
    with pytest.raises(InputError, match="missing labels"):
        load_arrays(tmp_path / "no_labels.npz")
    np.savez(tmp_path / "objects.npz", inputs=np.array([object()] * 4), labels=np.zeros(4, int))
    with pytest.raises(InputError, match=r"not an \.npz of plain arrays"):
        load_arrays(tmp_path / "objects.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match=r"not an \.npz"):
        load_arrays(tmp_path / "junk.npz")
    with pytest.raises(InputError, match="not found"):
        load_arrays(tmp_path / "missing.npz")


def test_arrays_split_and_default_class_names(tmp_path: Path) -> None:
    labels = np.repeat(np.arange(3), 10)
    np.savez(tmp_path / "a.npz", inputs=np.random.default_rng(0).random((30, 2, 5, 5)), labels=labels)
    train, test = load_dataset(f"npz:{tmp_path / 'a.npz'}", test_fraction=0.2, seed=1)
    assert train.classes == ("0", "1", "2") and len(train) == 24 and len(test) == 6
    assert train.images.dtype == np.float32 and train.images.shape[1:] == (2, 5, 5)
