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


def test_two_devices_run_measured_and_plan_reused(private_cache: object) -> None:
    args = (FACE_MODEL, "--devices", "cpu,reference", "--iterations", "2", "--warmup", "0", "--json")
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    out = json.loads(first.stdout)
    assert out["reused_plan"] is False and out["plan_file"].startswith(str(private_cache))
    rows = {row["set"]: row for row in out["comparison"]}
    assert {"chosen", "fastest single", "greedy (all)"} <= rows.keys()
    greedy = rows["greedy (all)"]
    assert greedy["devices"] == ["cpu", "reference"]
    assert greedy["measured_seconds"] > 0 and greedy["measured_joules"] > 0
    assert greedy["max_abs_diff"] < 1e-4  # the partitioned run equals the single device
    assert set(greedy["copies"]) == {"cpu", "reference"}
    assert out["links"]["reference"]["latency_s"] == 0.0
    assert "fine-grained" in rows and rows["fine-grained"]["max_abs_diff"] < 1e-4

    again = json.loads(invoke(*args).stdout)
    assert again["reused_plan"] is True and again["plan_file"] == out["plan_file"]
    assert again["devices"] == out["devices"]  # the saved profiles, not new measurements
    replanned = json.loads(invoke(*args, "--replan", "--no-run").stdout)
    assert replanned["reused_plan"] is False
    assert "measured_seconds" not in replanned["comparison"][0]


def test_damaged_plan_file_warns_and_replans() -> None:
    args = (FACE_MODEL, "--devices", "cpu", "--iterations", "1", "--warmup", "0", "--no-run", "--json")
    out = json.loads(invoke(*args).stdout)
    with open(out["plan_file"], "w") as f:
        f.write("{ not json")
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    again = json.loads(result.stdout)
    assert again["reused_plan"] is False and "unusable" in again["notes"][0]
    assert json.loads(invoke(*args).stdout)["reused_plan"] is True  # rewritten
