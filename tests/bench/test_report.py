"""Markdown, console table and PNG chart from a hand-made result (no timing involved)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from rich.console import Console

from edgecnn.bench.chart import PALETTE, chart_rows, draw_chart
from edgecnn.bench.report import (
    NOTES_BEGIN,
    NOTES_END,
    console_table,
    existing_notes,
    noise_summary,
    ratio_summary,
    to_markdown,
)
from edgecnn.bench.runner import BenchResult, BenchSettings, Case, Measurement


def made_up_result() -> BenchResult:
    rows = [
        Measurement("resnet18", 1, "edgecnn", [20.0, 22.0, 30.0], None, 1_800_000_000),
        Measurement("resnet18", 1, "onnxruntime", [10.0, 11.0, 12.0], 2e-6, 1_800_000_000),
        Measurement("resnet18", 1, "torch", [], None, 1_800_000_000, error="KeyError: LRN"),
        Measurement("lenet5", 1, "edgecnn", [0.5, 0.5, 0.6], None, 400_000),
        Measurement("lenet5", 1, "onnxruntime", [1.0, 1.0, 1.0], 0.5, 400_000),
    ]
    return BenchResult(
        settings=BenchSettings(models=["resnet18", "lenet5"], batches=[1, 8], threads=2, rounds=3, warmup=1),
        measurements=rows,
        skipped_engines={"ncnn": "Python package 'ncnn' is not installed"},
        skipped_cases=[Case("simplecnn", 8, "the model file fixes batch 1")],
        gemm_peak_gflops=100.0,
        machine={
            "cpu": "Test CPU",
            "simd": ["avx2"],
            "llvm_cpu": "znver3",
            "isa": ["avx", "avx2", "fma"],
            "vector_bits": 256,
            "caches": {"L1d": 32768, "L2": 524288, "L3": None},
            "physical_cores": 2,
            "usable_cpus": 2,
            "logical_cpus": 2,
            "engines": {"edgecnn": "0.1.0"},
        },
        commands=["edgecnn bench --models resnet18,lenet5 --batch 1"],
        date="2026-01-01 00:00 UTC",
    )


def test_ratios_and_geometric_mean() -> None:
    result = made_up_result()
    assert result.ratio(result.measurements[0]) == 2.0 and result.ratio(result.measurements[2]) is None
    ratios, geomean = ratio_summary(result)[1]
    assert ratios == {"resnet18": 2.0, "lenet5": 0.5} and geomean == pytest.approx(1.0)
    assert result.measurements[0].gflops == pytest.approx(2 * 1.8e9 / 22e-3 / 1e9)


def test_markdown_has_the_table_machine_command_and_flags() -> None:
    text = to_markdown(made_up_result(), "benchmarks.png")
    lines = text.splitlines()
    header = (
        "| model | batch | engine | min ms | median ms | max ms | spread | x onnxruntime | GFLOP/s"
        " | % GEMM peak | max rel err |"
    )
    table = lines[lines.index(header) + 2 : lines.index(header) + 7]
    # spread: the interquartile range (21 to 26 ms) over the median (22 ms)
    assert (
        table[0]
        == "| resnet18 | 1 | edgecnn | 20.00 | 22.00 | 30.00 | 23% | 2.00 | 163.6 | 164% | reference |"
    )
    assert table[1].endswith("| 1.00 | 327.3 | 327% | 2.0e-06 |")
    assert table[2].startswith("| resnet18 | 1 | torch | failed: KeyError: LRN |")
    assert "**5.0e-01 (> 0.001)**" in table[4]
    assert "    edgecnn bench --models resnet18,lenet5 --batch 1" in lines
    assert (
        "- CPU: Test CPU (znver3; 256-bit vectors: avx/avx2/fma); L1d 32.0 KiB, L2 512.0 KiB, L3 ?;"
        " 2 cores, 2 usable of 2 logical CPUs; /proc/cpuinfo flags: avx2"
    ) in lines
    assert (
        "- Noise: spread = interquartile range / median of an engine's timed runs on one case;"
        " edgecnn: median spread 16%, largest 23% (resnet18 b1); onnxruntime: median spread 5%,"
        " largest 9% (resnet18 b1)"
    ) in lines
    assert "- Not run: ncnn: Python package 'ncnn' is not installed" in lines
    assert "Not run: simplecnn batch 8 (the model file fixes batch 1)" in text
    summary = lines.index(
        "| model | edgecnn ms | onnxruntime ms | edgecnn / ORT (median) | (min) | torch / ORT |"
    )
    assert lines[summary + 2 : summary + 5] == [
        "| resnet18 | 22.00 | 11.00 | **2.00** | 2.00 |  |",
        "| lenet5 | 0.50 | 1.00 | **0.50** | 0.50 |  |",
        "| geometric mean |  |  | **1.00** | 1.00 |  |",
    ]
    assert "![median latency relative to onnxruntime](benchmarks.png)" in lines


def test_spread_is_the_interquartile_range_over_the_median() -> None:
    assert Measurement("m", 1, "e", [10.0, 11.0, 12.0, 13.0, 30.0]).spread == pytest.approx((13 - 11) / 12)
    assert Measurement("m", 1, "e", [5.0]).spread == 0.0
    assert noise_summary(made_up_result())["edgecnn"] == (
        pytest.approx((0.1 + 5 / 22) / 2),
        5 / 22,
        "resnet18 b1",
    )


def test_notes_survive_regeneration(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.md"
    path.write_text(to_markdown(made_up_result(), None, "Findings: LRN is slow.\n"))
    assert existing_notes(path) == "Findings: LRN is slow.\n"
    regenerated = to_markdown(made_up_result(), None, existing_notes(path))
    assert f"{NOTES_BEGIN}\nFindings: LRN is slow.\n{NOTES_END}" in regenerated
    assert existing_notes(tmp_path / "absent.md") == ""


def test_console_table_lists_every_measurement() -> None:
    console = Console(width=200, record=True)
    console.print(console_table(made_up_result()))
    text = console.export_text()
    assert "failed: KeyError: LRN" in text and "5.0e-01 (> 0.001)" in text and "**" not in text
    assert len([line for line in text.splitlines() if "onnxruntime" in line]) == 3  # header + 2 rows


def test_chart_draws_one_bar_per_engine_and_case(tmp_path: Path) -> None:
    result = made_up_result()
    assert chart_rows(result) == [("resnet18 b1", [("edgecnn", 2.0)]), ("lenet5 b1", [("edgecnn", 0.5)])]
    path = tmp_path / "docs" / "chart.png"
    draw_chart(result, path)
    image = Image.open(path).convert("RGB")
    assert image.width == 1100 and 150 < image.height < 400
    red = tuple(int(PALETTE[0][i : i + 2], 16) for i in (1, 3, 5))
    assert (
        sum(1 for pixel in image.get_flattened_data() if pixel == red) > 500
    )  # the edgecnn bars (and legend)


def test_chart_needs_a_baseline(tmp_path: Path) -> None:
    result = made_up_result()
    result.measurements = [m for m in result.measurements if m.engine != "onnxruntime"]
    with pytest.raises(ValueError, match="onnxruntime baseline"):
        draw_chart(result, tmp_path / "chart.png")
