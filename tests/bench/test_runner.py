"""The timing loop: interleaving, warm-up, output checks, failures of one engine, result merging."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from edgecnn.bench.peers import ENGINES, Engine, Runner, select_engines
from edgecnn.bench.runner import (
    BenchResult,
    BenchSettings,
    Case,
    bench_case,
    cases,
    forward_macs,
    gemm_peak_gflops,
    relative_error,
    run_benchmark,
    runs_per_case,
)
from edgecnn.bench.zoo import model_path
from edgecnn.errors import InputError

SETTINGS = dict(threads=1, rounds=3, warmup=2, width=0.5, gap_s=0.0)


class ScriptedEngine(Engine):
    """A fake engine: a fixed function of the input, and a shared log of calls."""

    package = "numpy"

    def __init__(self, name: str, fn: object, log: list[str]) -> None:
        self.name, self.fn, self.log = name, fn, log

    def prepare(self, model: Path, threads: int, input_shape: tuple[int, ...], work_dir: Path) -> Runner:
        if self.fn is None:
            raise RuntimeError("cannot read\nthis model")

        def run(x: np.ndarray) -> np.ndarray:
            self.log.append(self.name)
            return self.fn(x)  # type: ignore[operator]

        return run


def reference_output(zoo_cache: Path) -> np.ndarray:
    import edgecnn

    x = np.random.default_rng(0).standard_normal((1, 1, 28, 28), dtype=np.float32)
    return edgecnn.load(model_path("lenet5", zoo_cache, 0.5), threads=1)(x)


def test_real_engines_on_lenet(zoo_cache: Path) -> None:
    engines, skipped = select_engines(["edgecnn", "onnxruntime"])
    assert not skipped
    progress: list[str] = []
    settings = BenchSettings(models=["lenet5"], batches=[2], **SETTINGS)
    rows = bench_case(Case("lenet5", 2), engines, settings, zoo_cache, progress.append)
    assert [m.engine for m in rows] == ["edgecnn", "onnxruntime"]
    assert len(progress) == runs_per_case(settings, engines) == 10 and set(progress) == {"lenet5 b2"}
    for m in rows:
        assert m.ok and len(m.times_ms) == 3 and m.min_ms <= m.median_ms <= m.max_ms
        # conv 3x1x5x5 on 28x28, conv 8x3x5x5 on 10x10, FC 200->60->42->10 (width 0.5), batch 2
        assert m.macs == 2 * (3 * 25 * 784 + 8 * 3 * 25 * 100 + 200 * 60 + 60 * 42 + 42 * 10)
        assert m.gflops > 0
    assert rows[0].max_rel_error is None
    assert rows[1].max_rel_error is not None and rows[1].max_rel_error < 1e-5 and not rows[1].flagged


def test_interleaving_warmup_and_output_check(zoo_cache: Path) -> None:
    want = reference_output(zoo_cache)
    log: list[str] = []
    engines = [
        ScriptedEngine("edgecnn", lambda x: want, log),
        ScriptedEngine("close", lambda x: want * (1 + 1e-6), log),
        ScriptedEngine("wrong", lambda x: want + 1.0, log),
    ]
    settings = BenchSettings(models=["lenet5"], batches=[1], **SETTINGS)
    rows = {m.engine: m for m in bench_case(Case("lenet5", 1), engines, settings, zoo_cache)}
    warm, timed = log[:6], log[6:]
    assert warm == ["edgecnn"] * 2 + ["close"] * 2 + ["wrong"] * 2
    # round-robin, each round starting one engine later
    assert timed == ["edgecnn", "close", "wrong", "close", "wrong", "edgecnn", "wrong", "edgecnn", "close"]
    assert rows["close"].max_rel_error == pytest.approx(1e-6, rel=0.1) and not rows["close"].flagged
    assert rows["wrong"].flagged


def test_an_engine_that_fails_is_reported_and_the_rest_still_run(zoo_cache: Path) -> None:
    want = reference_output(zoo_cache)
    log: list[str] = []
    engines = [ScriptedEngine("edgecnn", lambda x: want, log), ScriptedEngine("broken", None, log)]
    progress: list[str] = []
    settings = BenchSettings(models=["lenet5"], batches=[1], **SETTINGS)
    rows = {m.engine: m for m in bench_case(Case("lenet5", 1), engines, settings, zoo_cache, progress.append)}
    assert rows["edgecnn"].ok and len(rows["edgecnn"].times_ms) == 3
    assert not rows["broken"].ok and rows["broken"].error == "RuntimeError: cannot read this model"
    assert len(progress) == runs_per_case(settings, engines)  # the progress bar still reaches its end


def test_relative_error() -> None:
    want = np.array([[1.0, -4.0], [0.0, 2.0]], np.float32)
    assert relative_error(want, want) == 0.0
    assert relative_error(want + 0.04, want) == pytest.approx(0.01)
    assert relative_error(want.ravel(), want) == 0.0  # ncnn drops the batch axis: sizes decide
    assert relative_error(want[:1], want) == float("inf")
    assert relative_error(np.full_like(want, np.nan), want) == float("inf")
    assert relative_error(np.ones(2), np.zeros(2)) == 1.0


def test_cases_skip_batches_a_model_file_fixes() -> None:
    settings = BenchSettings(models=["simplecnn", "lenet5"], batches=[1, 8], threads=1)
    found = [(c.model, c.batch, bool(c.skipped)) for c in cases(settings)]
    assert found == [
        ("simplecnn", 1, False),
        ("simplecnn", 8, True),
        ("lenet5", 1, False),
        ("lenet5", 8, False),
    ]


def onnx_macs(path: Path) -> int:
    """Conv and Gemm MACs from onnx's own shape inference: an independent count."""
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.value_info}
    shapes.update({v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.output})
    weights = {t.name: list(t.dims) for t in model.graph.initializer}
    total = 0
    for node in model.graph.node:
        if node.op_type in ("Conv", "Gemm"):
            total += int(np.prod(shapes[node.output[0]])) * int(np.prod(weights[node.input[1]][1:]))
    return total


def test_forward_macs_of_the_bundled_classifier() -> None:
    path = model_path("simplecnn", "/nonexistent")  # bundled: the cache is not touched
    macs = forward_macs(path, np.zeros((1, 3, 128, 128), np.float32))
    assert macs == onnx_macs(path) > 1_000_000


def test_gemm_peak_is_a_plausible_rate() -> None:
    peak = gemm_peak_gflops(threads=1, size=256, repeats=2)
    assert 0.1 < peak < 10_000


def test_select_engines_skips_missing_packages_and_rejects_unknown_names() -> None:
    class Missing(Engine):
        name = "missing"
        package = "no_such_package_for_edgecnn_tests"

    assert Missing().available() == "Python package 'no_such_package_for_edgecnn_tests' is not installed"
    engines, skipped = select_engines(None)
    assert {e.name for e in engines} | set(skipped) == set(ENGINES)
    assert all(reason for reason in skipped.values())
    with pytest.raises(InputError, match=r"unknown engine.*tensorrt"):
        select_engines(["edgecnn", "tensorrt"])


def test_run_benchmark_then_json_round_trip_and_merge(zoo_cache: Path) -> None:
    engines, _ = select_engines(["edgecnn", "onnxruntime"])
    settings = BenchSettings(models=["lenet5", "simplecnn"], batches=[1, 2], **SETTINGS)
    result = run_benchmark(settings, engines, {"ncnn": "not installed"}, zoo_cache)
    assert [(m.model, m.batch) for m in result.measurements[::2]] == [
        ("lenet5", 1),
        ("lenet5", 2),
        ("simplecnn", 1),
    ]
    assert [c.batch for c in result.skipped_cases] == [2] and result.gemm_peak_gflops > 0
    assert result.ratio(result.measurements[1]) == 1.0
    data = json.loads(json.dumps(result.to_dict()))
    assert data["results"][1]["ratio_to_onnxruntime"] == 1.0
    again = BenchResult.from_dict(data)
    assert again.to_dict() == data

    newer = BenchResult.from_dict(data)
    newer.settings = BenchSettings(models=["lenet5"], batches=[1], **SETTINGS)
    newer.measurements = [m for m in newer.measurements if (m.model, m.batch) == ("lenet5", 1)]
    for m in newer.measurements:
        m.times_ms = [t * 2 for t in m.times_ms]
    newer.commands = ["edgecnn bench --models lenet5 --batch 1"]
    merged = newer.merged_into(again)
    assert len(merged.measurements) == len(again.measurements)
    lenet1 = [m for m in merged.measurements if (m.model, m.batch) == ("lenet5", 1)]
    assert lenet1 == newer.measurements
    assert merged.commands == [*again.commands, "edgecnn bench --models lenet5 --batch 1"]
    newer.machine = {**newer.machine, "cpu": "some other CPU"}
    with pytest.raises(InputError, match="different CPUs"):
        newer.merged_into(again)
