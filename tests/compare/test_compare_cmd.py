"""`edgecnn compare` on the command line: the table, --json, and errors as one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from edgecnn.cli.app import app

from .test_layers import onnx_model

runner = CliRunner()


def test_json_names_the_first_layer_over_tolerance(tmp_path: Path) -> None:
    model = onnx_model(tmp_path / "m.onnx")
    planted = onnx_model(tmp_path / "planted.onnx", bump=0.5)
    x = np.random.default_rng(3).standard_normal((1, 3, 12, 12)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    args = ["compare", str(model), "--against", "onnxruntime", "--peer-model", str(planted)]
    result = runner.invoke(app, [*args, "--input", f"x={tmp_path / 'x.npy'}", "--no-optimize", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["first_over"] == {"tensor": "c2", "layer": "Conv_2", "op": "Conv"}
    assert report["inputs"] == {"x": [1, 3, 12, 12]}
    assert [row["status"] for row in report["layers"]][:3] == ["ok", "ok", "over"]


def test_table_says_what_the_optimised_graph_hides(tmp_path: Path) -> None:
    model = onnx_model(tmp_path / "m.onnx")
    result = runner.invoke(app, ["compare", str(model), "--against", "reference", "--threads", "1"])
    assert result.exit_code == 0, result.output
    assert "--no-optimize compares them too" in result.output
    assert "within tolerance" in result.output


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    model = onnx_model(tmp_path / "m.onnx")
    result = runner.invoke(app, ["compare", str(model), "--against", "opencv", "--input", "missing.npy"])
    assert result.exit_code == 1
    assert "cannot read input array missing.npy" in result.output
