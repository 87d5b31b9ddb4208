"""`--compare`: an earlier run's ratios beside this run's, from made-up results (no timing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from bench.test_report import made_up_result
from edgecnn.bench.compare import comparison, load_result, same_machine
from edgecnn.bench.report import comparison_table, to_markdown
from edgecnn.bench.runner import BenchResult, Measurement
from edgecnn.errors import InputError


def earlier_result() -> BenchResult:
    """The made-up run before: resnet18 at 2.5x onnxruntime (now 2.0x), no lenet5 row."""
    result = made_up_result()
    result.measurements = [
        Measurement("resnet18", 1, "edgecnn", [25.0], None),
        Measurement("resnet18", 1, "onnxruntime", [10.0], None),
    ]
    result.date = "2025-12-31 00:00 UTC"
    result.machine = {**result.machine, "cpu": "Older CPU"}
    return result


def test_ratios_before_now_and_change() -> None:
    record = comparison(made_up_result(), earlier_result(), Path("before.json"))
    assert record["rows"] == [
        {"model": "resnet18", "batch": 1, "before": 2.5, "now": 2.0, "change": pytest.approx(0.8)},
        {"model": "lenet5", "batch": 1, "before": None, "now": 0.5, "change": None},
    ]
    # the geometric means cover only the cases both runs have
    assert record["geometric_means"] == {"1": {"before": 2.5, "now": 2.0, "change": pytest.approx(0.8)}}
    assert record["cpu"] == "Older CPU" and record["same_cpu"] is False and record["file"] == "before.json"


def test_comparison_in_the_markdown_the_console_and_the_json() -> None:
    result = made_up_result()
    result.comparison = comparison(result, earlier_result(), Path("before.json"))
    lines = to_markdown(result, None).splitlines()
    start = lines.index("## Against an earlier run")
    assert "on another or unrecorded machine: Older CPU, avx/avx2/fma" in lines[start + 2]
    assert lines[start + 4 : start + 10] == [
        "| model | batch | before | now | change |",
        "|---|---:|---:|---:|---:|",
        "| resnet18 | 1 | 2.50 | 2.00 | 0.800 |",
        "| lenet5 | 1 | - | 0.50 | - |",
        "| geometric mean | 1 | 2.50 | 2.00 | 0.800 |",
        "",
    ]
    console = Console(width=120, record=True)
    console.print(comparison_table(result.comparison))
    assert "0.800" in console.export_text()
    again = BenchResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.comparison == json.loads(json.dumps(result.comparison))


def test_same_machine_needs_every_recorded_fact_to_agree() -> None:
    now = made_up_result().machine
    assert same_machine(now, dict(now))
    assert not same_machine({**now, "isa": ["avx2", "avx512f"]}, now)
    assert not same_machine({k: v for k, v in now.items() if k != "caches"}, now)  # an older run's JSON


def test_load_result_rejects_what_is_not_a_bench_json(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(made_up_result().to_dict()))
    assert load_result(path).measurements[0].times_ms == [20.0, 22.0, 30.0]
    with pytest.raises(InputError, match="cannot read it"):
        load_result(tmp_path / "absent.json")
    for text in ("not json", "[]", '{"results": []}'):
        path.write_text(text)
        with pytest.raises(InputError, match="not an `edgecnn bench` JSON result"):
            load_result(path)
