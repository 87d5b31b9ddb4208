"""The whole example, and `edgecnn demo --radar`, at a size that runs in seconds."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgecnn.cli import radar_view
from edgecnn.cli.app import app
from edgecnn.errors import InputError
from edgecnn.importers.radar import load_radar
from edgecnn.radar import ExampleHooks, ExampleSettings, run_example

SMALL = {"train_per_class": 12, "test_per_class": 4, "epochs": 2, "throughput_returns": 200}


def test_run_example_writes_the_model_and_the_figure(tmp_path: Path) -> None:
    stages: list[str] = []
    runs: list[None] = []
    hooks = ExampleHooks(on_stage=lambda name, steps: stages.append(name), on_run=lambda: runs.append(None))
    report = run_example(tmp_path / "out", ExampleSettings(seed=4, **SMALL), hooks)
    assert stages == [
        "simulating returns",
        "training",
        "evaluating the saved model",
        "data-parallel inference",
    ]
    assert report.model_path.parent == tmp_path / "out"
    assert [n.op for n in load_radar(report.model_path).nodes][:3] == ["Conv", "AveragePool", "Relu"]
    assert report.figure_path.read_bytes()[:4] == b"\x89PNG"
    assert len(report.training) == 2 and report.evaluation.confusion.sum() == 40
    assert report.throughput[0].cores == 1 and report.throughput[0].returns == 200
    assert len(runs) == 3 * len(report.throughput)


def test_demo_radar_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(radar_view, "ExampleSettings", functools.partial(ExampleSettings, **SMALL))
    result = CliRunner().invoke(app, ["demo", "--radar", "--seed", "5", "--save", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "held-out accuracy" in result.output and "returns/s per core" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["radar-confusion.png", "radar-hrrp.bin"]


def test_output_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("")
    result = CliRunner().invoke(app, ["demo", "--radar", "--save", str(tmp_path / "taken")])
    assert result.exit_code == 1
    assert "cannot create the output directory" in result.output


def test_example_settings_are_checked() -> None:
    with pytest.raises(InputError, match="seed >= 0"):
        ExampleSettings(seed=-2)
    with pytest.raises(InputError, match="counts >= 1"):
        ExampleSettings(train_per_class=0)
