"""`edgecnn plan` end-to-end on the CPU with the bundled face classifier (registered on a local Typer app)."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from edgecnn.cli import plan_cmd
from edgecnn.cli.demo_cmd import bundled
from edgecnn.hetero import DeviceProfile, search_combination

FACE_MODEL = bundled("simplecnn/face_binary_cls.onnx")


def invoke(*args: object) -> object:
    app = typer.Typer()
    app.command(plan_cmd.NAME)(plan_cmd.command)
    app.command("noop")(lambda: None)  # two commands, so the plan command is addressed by name
    return CliRunner().invoke(app, [plan_cmd.NAME, *(str(a) for a in args)])


def test_plan_on_cpu_json() -> None:
    result = invoke(FACE_MODEL, "--devices", "cpu", "--iterations", "2", "--warmup", "0", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["chosen"] == ["cpu"]
    assert out["shares"] == {"cpu": 1.0}
    assert out["devices"][0]["seconds"] > 0 and out["devices"][0]["joules"] > 0
    assert out["devices"][0]["meter"]
    assert {row["set"] for row in out["comparison"]} == {"chosen", "fastest single", "greedy (all)"}


def test_plan_text_report_names_the_meter() -> None:
    result = invoke(FACE_MODEL, "--devices", "cpu", "--iterations", "1", "--warmup", "0")
    assert result.exit_code == 0, result.output
    assert "meter" in result.stdout and "chosen: cpu" in result.stdout
    assert "greedy (all)" in result.stdout


def test_comparison_rows_on_worked_example() -> None:
    profiles = [
        DeviceProfile("cpu", 11.94, joules=52.12),
        DeviceProfile("gpu0", 1.9, joules=1.48),
        DeviceProfile("gpu1", 4.5, watts=0.44),
    ]
    rows = {r["set"]: r for r in plan_cmd.comparison_rows(profiles, search_combination(profiles))}
    assert rows["chosen"]["devices"] == ["gpu0", "gpu1"]
    assert rows["fastest single"]["devices"] == ["gpu0"]
    assert "best-EDP single" not in rows
    assert rows["greedy (all)"]["edp"] > rows["chosen"]["edp"]
    assert rows["chosen"]["seconds"] < rows["fastest single"]["seconds"] == pytest.approx(1.9)
