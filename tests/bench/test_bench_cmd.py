"""`edgecnn bench` end to end on a small model, through a one-command typer app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from edgecnn.cli import bench_cmd
from edgecnn.cli.app import EXIT_ERROR, reports_errors

app = typer.Typer(add_completion=False)
app.command(name=bench_cmd.NAME)(reports_errors(bench_cmd.command))
QUICK = [
    "--rounds",
    "2",
    "--warmup",
    "1",
    "--threads",
    "1",
    "--engines",
    "edgecnn,onnxruntime",
    "--width",
    "0.5",
]


def invoke(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_bench_writes_markdown_chart_and_json(tmp_path: Path) -> None:
    output = tmp_path / "docs" / "benchmarks.md"
    result = invoke(
        "--models", "lenet5", "--batch", "1,2", *QUICK, "--cache", tmp_path / "cache", "--output", output
    )
    assert result.exit_code == 0, result.output
    assert "lenet5" in result.stdout and "edgecnn / onnxruntime geometric mean" in result.stdout
    text = output.read_text()
    assert "--models lenet5 --batch 1,2 --threads 1 --rounds 2 --warmup 1" in text
    assert text.count("| lenet5 | 1 |") == 2 and text.count("| lenet5 | 2 |") == 2  # the results table
    assert text.count("| lenet5 |") == 6  # and one summary line per batch
    assert output.with_suffix(".png").stat().st_size > 1000
    data = json.loads(output.with_suffix(".json").read_text())
    assert [(r["batch"], r["engine"]) for r in data["results"]] == [
        (1, "edgecnn"),
        (1, "onnxruntime"),
        (2, "edgecnn"),
        (2, "onnxruntime"),
    ]

    # --update re-runs one case and keeps the other's rows
    again = invoke(
        "--models",
        "lenet5",
        "--batch",
        "2",
        *QUICK,
        "--cache",
        tmp_path / "cache",
        "--output",
        output,
        "--update",
    )
    assert again.exit_code == 0, again.output
    merged = json.loads(output.with_suffix(".json").read_text())
    assert len(merged["results"]) == 4 and len(merged["commands"]) == 2
    kept = [{k: v for k, v in row.items() if k != "fraction_of_gemm_peak"} for row in merged["results"][:2]]
    assert kept == [
        {k: v for k, v in row.items() if k != "fraction_of_gemm_peak"} for row in data["results"][:2]
    ]
    assert merged["gemm_peak_gflops"] >= data["gemm_peak_gflops"]


def test_bench_json_output(tmp_path: Path) -> None:
    result = invoke("--models", "lenet5", "--batch", "1", *QUICK, "--cache", tmp_path, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["settings"]["threads"] == 1 and document["gemm_peak_gflops"] > 0
    assert {r["engine"] for r in document["results"]} == {"edgecnn", "onnxruntime"}
    assert document["machine"]["caches"].keys() == {"L1d", "L2", "L3"} and document["machine"]["isa"]
    assert all(r["spread"] >= 0 for r in document["results"])

    earlier = tmp_path / "earlier.json"
    earlier.write_text(result.stdout)
    again = invoke("--models", "lenet5", "--batch", "1", *QUICK, "--cache", tmp_path, "--compare", earlier)
    assert again.exit_code == 0, again.output
    assert "vectors" in again.stdout and "noise (spread" in again.stdout
    row = next(
        line.split()
        for line in again.stdout.splitlines()
        if line.startswith(" lenet5") and "." in line and len(line.split()) == 5
    )
    assert float(row[2]) == pytest.approx(document["results"][0]["ratio_to_onnxruntime"], abs=0.006)


def test_bench_list() -> None:
    result = invoke("--list")
    assert result.exit_code == 0
    assert "tiny-yolo" in result.stdout and "engine onnxruntime" in result.stdout


def test_bench_rejects_bad_options(tmp_path: Path) -> None:
    for args, message in (
        (["--models", "resnet1000"], "unknown benchmark model 'resnet1000'"),
        (["--engines", "onnxruntime"], "--engines must include edgecnn"),
        (["--engines", "edgecnn,tensorrt"], "unknown engine(s) tensorrt"),
        (["--batch", "1,x"], "--batch takes comma-separated integers"),
        (["--batch", "0"], "--batch needs batch sizes >= 1"),
        (["--compare", tmp_path / "absent.json"], "--compare"),
    ):
        result = invoke(*args, "--cache", tmp_path)
        assert result.exit_code == EXIT_ERROR, (args, result.output)
        assert message in result.output
