"""`edgecnn train` (registered here on a private app until the lead adds it to cli/app.py) and
`edgecnn time --backward`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from PIL import Image
from train_helpers import small_lenet
from typer.testing import CliRunner

import edgecnn
from edgecnn.cli import train_cmd
from edgecnn.cli.app import EXIT_ERROR, app, reports_errors
from edgecnn.compress import density

train_app = typer.Typer()
train_app.command(name="train")(reports_errors(train_cmd.command))
train_app.command(name="noop")(lambda: None)  # two commands: typer keeps the subcommand name


def invoke(application: typer.Typer, *args: object) -> object:
    return CliRunner().invoke(application, [str(a) for a in args])


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
        train_app, "train", model, "--dataset", f"folder:{folder}", "--epochs", "3", "--batch-size", "8",
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
        train_app, "train", "--resume", tmp_path / "ckpt" / "epoch-2.ecnn", "--dataset", f"folder:{folder}",
        "--epochs", "3", "--quiet", "-o", tmp_path / "resumed.ecnn",
    )  # fmt: skip
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stdout.count("\n    3 ") == 1  # only epoch 3 ran


def test_train_refusals(tmp_path: Path) -> None:
    result = invoke(train_app, "train", "-o", tmp_path / "x.ecnn")
    assert result.exit_code != 0 and "exactly one of MODEL, --lenet5 or --resume" in result.output
    result = invoke(
        train_app, "train", "--lenet5", "--dataset", "idx:" + str(tmp_path), "-o", tmp_path / "x.ecnn"
    )
    assert result.exit_code == EXIT_ERROR and "no train-images-idx3-ubyte" in result.output


def test_time_backward_reports_every_layer(tmp_path: Path) -> None:
    model = tmp_path / "small.ecnn"
    edgecnn.Model(small_lenet()).save(model)
    result = invoke(app, "time", model, "--backward", "--batch", "4", "--iterations", "2", "--warmup", "0")
    assert result.exit_code == 0, result.output
    for name in ("conv1", "pool2", "ip2", "loss", "average forward pass", "forward-backward"):
        assert name in result.stdout
    document = json.loads(
        invoke(app, "time", model, "--backward", "--batch", "4", "--iterations", "2", "--json").stdout
    )
    assert [row["name"] for row in document["layers"]][:2] == ["conv1", "pool1"]
    assert len(document["forward_ms"]) == 2 and document["mean_forward_backward_ms"] > 0
    assert all(row["backward_ms"] >= 0 for row in document["layers"])
