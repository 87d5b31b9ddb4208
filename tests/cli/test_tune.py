"""`edgecnn tune` on the bundled face classifier: the table, the JSON report, the cache it writes,
and the next load of the model following the cache."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import edgecnn
from edgecnn.cli import tune_cmd
from edgecnn.cli.app import EXIT_ERROR, reports_errors
from edgecnn.cli.demo_cmd import bundled
from edgecnn.kernels import tuning
from edgecnn.kernels.registry import scoped_registrations
from edgecnn.paths import CACHE_ENV
from edgecnn.runtime.feeds import random_feeds

FACE_MODEL = bundled("simplecnn/face_binary_cls.onnx")

app = typer.Typer()
app.command(name=tune_cmd.NAME)(reports_errors(tune_cmd.command))
app.command(name="unused")(lambda: None)  # two commands: typer then expects the command's name


def invoke(*args: object) -> object:
    return CliRunner().invoke(app, [tune_cmd.NAME, *(str(a) for a in args)])


@pytest.fixture(autouse=True, scope="module")
def registered_winograd() -> Iterator[None]:
    """The Winograd kernels registered for this module's tests by a fresh import, whether or not
    kernels/cpu/__init__.py imports them, and the registry restored afterwards."""
    importlib.import_module("edgecnn.kernels.cpu")  # the backend's own kernels: registered for good
    with scoped_registrations():
        sys.modules.pop("edgecnn.kernels.cpu.conv.winograd", None)
        importlib.import_module("edgecnn.kernels.cpu.conv.winograd")
        yield


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("EDGECNN_NUM_THREADS", "1")
    return tmp_path / "cache" / tuning.CACHE_FILE


def test_tune_prints_a_table_and_caches_the_winners(cache: Path) -> None:
    result = invoke(FACE_MODEL, "--threads", "1")
    assert result.exit_code == 0, result.output
    assert "winner" in result.stdout and "speed-up" in result.stdout
    assert "im2col_gemm" in result.stdout
    assert str(cache) in result.stdout.replace("\n", "")
    entries = tuning.this_machine_choices(cache)
    assert entries, "nothing cached"
    for choice in entries.values():
        assert choice.kernel == min(choice.times_ms, key=choice.times_ms.__getitem__)


def test_tune_json_and_the_next_load_uses_the_cache(cache: Path) -> None:
    result = invoke(FACE_MODEL, "--threads", "1", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["threads"] == 1 and report["cache"] == str(cache)
    layers = report["layers"]
    assert layers and all(len(layer["times_ms"]) >= 2 for layer in layers)
    winners = {layer["layer"]: layer["winner"] for layer in layers}
    for layer in layers:
        assert layer["speedup"] == pytest.approx(
            layer["times_ms"][layer["heuristic"]] / layer["times_ms"][layer["winner"]]
        )
    net = edgecnn.load(FACE_MODEL, threads=1)
    plan = net.plan_for(random_feeds(net.inputs))
    chosen = {step.node.name: step.kernel.name for step in plan.steps if step.node.name in winners}
    assert chosen == winners


def test_other_thread_counts_keep_the_heuristics(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(FACE_MODEL, "--threads", "1", "--json")
    assert result.exit_code == 0, result.output
    layers = json.loads(result.stdout)["layers"]
    monkeypatch.setenv("EDGECNN_NUM_THREADS", "2")
    net = edgecnn.load(FACE_MODEL, threads=2)
    plan = net.plan_for(random_feeds(net.inputs))
    heuristic = {layer["layer"]: layer["heuristic"] for layer in layers}
    assert {s.node.name: s.kernel.name for s in plan.steps if s.node.name in heuristic} == heuristic


def test_damaged_cache_warns_and_is_rebuilt(cache: Path) -> None:
    cache.parent.mkdir(parents=True)
    cache.write_text("{ damaged")
    with pytest.warns(tuning.TuningCacheWarning):
        result = invoke(FACE_MODEL, "--threads", "1", "--json")
    assert result.exit_code == 0, result.output
    assert tuning.this_machine_choices(cache)


def test_missing_model_is_a_one_line_error(tmp_path: Path) -> None:
    result = invoke(tmp_path / "missing.onnx")
    assert result.exit_code == EXIT_ERROR
    assert "missing.onnx" in result.output


def test_unwritable_cache_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))  # a directory inside a file
    with pytest.warns(tuning.TuningCacheWarning):  # reading it fails too
        result = invoke(FACE_MODEL, "--threads", "1")
    assert result.exit_code == EXIT_ERROR
    assert "cannot write the tuning cache" in result.output
