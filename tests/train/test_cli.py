"""`edgecnn train` and `edgecnn time --backward` through the real `edgecnn` app."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from train_helpers import small_lenet
from typer.testing import CliRunner, Result

import edgecnn
from edgecnn.cli.app import EXIT_ERROR, EXIT_USAGE, app
from edgecnn.compress import density


def invoke(*args: object) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def bars_folder(root: Path, per_class: int = 12) -> Path:
    """Two classes of 16x16 images: a bar on the left or on the right."""
    rng = np.random.default_rng(0)
    for label, name in enumerate(("left", "right")):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            image = rng.integers(0, 60, (16, 16), dtype=np.uint8)
            image[:, 8 * label : 8 * label + 8] += 180
            Image.fromarray(image).save(root / name / f"{i}.png")
    return root


def test_train_a_model_file_prune_and_save(tmp_path: Path) -> None:
    graph = small_lenet()
    model = tmp_path / "small.ecnn"
    edgecnn.Model(graph).save(model)
    folder = bars_folder(tmp_path / "bars")
    out = tmp_path / "trained.ecnn"
    result = invoke(
        "train", model, "--dataset", f"folder:{folder}", "--epochs", "3", "--batch-size", "8",
        "--lr", "0.02", "--shift", "0", "--prune", "ip1=0.2", "--retrain-steps", "3", "--final-steps", "2", "--retention-step", "0.4",
        "--checkpoint-dir", tmp_path / "ckpt", "--quiet", "-o", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "epoch" in result.stdout and "prune-retrain" in result.stdout and "test accuracy" in result.stdout
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == [
        "epoch-1.ecnn",
        "epoch-2.ecnn",
        "epoch-3.ecnn",
    ]
    trained = edgecnn.load(out)
    assert density(trained.graph.initializers["ip1.w"]) == pytest.approx(0.2, abs=0.01)
    assert trained(np.zeros((1, 1, 16, 16), np.float32)).shape == (1, 3)
    resumed = invoke(
        "train", "--resume", tmp_path / "ckpt" / "epoch-2.ecnn", "--dataset", f"folder:{folder}",
        "--epochs", "3", "--quiet", "-o", tmp_path / "resumed.ecnn",
    )  # fmt: skip
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stdout.count("\n    3 ") == 1  # only epoch 3 ran


def test_train_refusals(tmp_path: Path) -> None:
    result = invoke("train", "-o", tmp_path / "x.ecnn")
    assert result.exit_code == EXIT_USAGE and "exactly one of MODEL, --lenet5 or --resume" in result.stderr
    result = invoke("train", "--lenet5", "--dataset", "idx:" + str(tmp_path), "-o", tmp_path / "x.ecnn")
    assert result.exit_code == EXIT_ERROR and "no train-images-idx3-ubyte" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prune", "1.5"], "Invalid value for --prune: '1.5': the keep ratio must be in 0..1"),
        (["--structured", "conv1=x"], "Invalid value for --structured: 'conv1=x': expected KEEP"),
        (["--momentum", "1"], "Invalid value for '--momentum'"),
    ],
)
def test_bad_option_values_are_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = invoke("train", "--lenet5", *args, "-o", tmp_path / "x.ecnn")
    assert result.exit_code == EXIT_USAGE, result.output
    assert message in " ".join(result.stderr.replace("│", " ").split())  # rich wraps it in a box
    assert not (tmp_path / "x.ecnn").exists()


def test_digits_without_scikit_learn_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)  # importing it raises ImportError
    result = invoke("train", "--lenet5", "--dataset", "digits", "-o", tmp_path / "x.ecnn")
    assert result.exit_code == EXIT_ERROR
    assert "pip install 'edgecnn[train]'" in result.stderr


def test_time_backward_reports_every_layer(tmp_path: Path) -> None:
    model = tmp_path / "small.ecnn"
    edgecnn.Model(small_lenet()).save(model)
    result = invoke("time", model, "--backward", "--batch", "4", "--iterations", "2", "--warmup", "0")
    assert result.exit_code == 0, result.output
    for name in ("conv1", "pool2", "ip2", "loss", "average forward pass", "forward-backward"):
        assert name in result.stdout
    document = json.loads(
        invoke("time", model, "--backward", "--batch", "4", "--iterations", "2", "--json").stdout
    )
    assert [row["name"] for row in document["layers"]][:2] == ["conv1", "pool1"]
    assert len(document["forward_ms"]) == 2 and document["mean_forward_backward_ms"] > 0
    assert all(row["backward_ms"] >= 0 for row in document["layers"])
