"""quantize plans, compress() storage choices, the saved files, the sensitivity scan and the report."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from compress_helpers import net, wide_net

from edgecnn.compress import DEFAULT_KEEPS, agreement_score, compress, density, prune, quantize, sensitivity
from edgecnn.compress.report import compare, tensor_rows
from edgecnn.errors import InputError
from edgecnn.format import load_ecnn, save_ecnn, stored_nbytes
from edgecnn.importers.onnx import load_onnx
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions

FACE_ONNX = Path(str(resources.files("edgecnn") / "data" / "simplecnn" / "face_binary_cls.onnx"))
ONE_THREAD = RuntimeOptions.resolve(threads=1)


def test_quantize_plans_name_every_weight_with_its_output_axis() -> None:
    assert quantize(net(), "int8") == {
        "conv.w": "int8",
        "fc1.w": "int8",
        "mm.w": "int8:axis=1",
        "fc2.w": "int8:axis=1",
    }
    assert quantize(net(), "fp16") == dict.fromkeys(["conv.w", "fc1.w", "mm.w", "fc2.w"], "float16")
    assert quantize(net(), "float16") == quantize(net(), "fp16")
    with pytest.raises(InputError, match="unknown quantisation 'int4'"):
        quantize(net(), "int4")


def test_int8_scales_follow_output_channels(tmp_path: Path) -> None:
    """fc2.w is [K, N]: one scale per output column keeps a tiny column as exact as a large one."""
    graph = net()
    w = graph.initializers["fc2.w"].copy()
    w[:, 0] *= 1e-4
    graph.initializers["fc2.w"] = w
    save_ecnn(graph, tmp_path / "q.ecnn", storage=quantize(graph, "int8"))
    loaded = load_ecnn(tmp_path / "q.ecnn").initializers["fc2.w"]
    relative = np.abs(loaded - w).max(axis=0) / np.abs(w).max(axis=0)
    assert relative.max() <= 0.5 / 127 + 1e-6


@pytest.mark.parametrize(
    ("quant", "keep", "expected"),
    [
        (None, None, {}),
        (None, 0.3, {"fc.w": "csr", "mm.w": "csr"}),  # 8 bytes per non-zero against 4 per entry
        ("fp16", 0.3, {"fc.w": "csr:float16", "mm.w": "csr:float16"}),  # 6 against 2
        ("fp16", 0.45, {"fc.w": "float16", "mm.w": "float16"}),
        ("int8", 0.3, {"fc.w": "int8", "mm.w": "int8:axis=1"}),  # 5 against 1
        ("int8", 0.05, {"fc.w": "csr:int8", "mm.w": "csr:int8"}),
    ],
)
def test_compress_picks_csr_only_where_it_is_smaller(
    quant: str | None, keep: float | None, expected: dict
) -> None:
    graph, plan = compress(wide_net(), prune=keep, quantize=quant)
    assert plan == expected
    for name, storage in plan.items():  # the choice is the smaller of the two
        w = graph.initializers[name]
        dense = quantize(graph, quant)[name] if quant else "raw"
        assert stored_nbytes(w, storage) <= stored_nbytes(w, dense)


def test_quantised_storage_that_would_grow_a_tiny_tensor_is_skipped() -> None:
    _, plan = compress(net(), quantize="int8")  # fc2.w has 21 entries: 84 bytes raw, 85 as int8
    assert "fc2.w" not in plan and plan["conv.w"] == "int8"


def test_sparse_threshold_bounds_the_density_of_csr_tensors() -> None:
    _, plan = compress(net(), prune_layers={"fc1": 0.3, "conv": 0.1}, sparse_threshold=0.2)
    assert plan == {"conv.w": "csr"}
    _, none = compress(net(), prune=0.1, sparse_threshold=0.0)
    assert none == {}
    with pytest.raises(InputError, match="sparse_threshold"):
        compress(net(), sparse_threshold=1.5)


def test_a_compressed_face_classifier_is_smaller_and_close(tmp_path: Path) -> None:
    graph = load_onnx(FACE_ONNX)
    save_ecnn(graph, tmp_path / "raw.ecnn")
    small, plan = compress(graph, prune=0.3, quantize="int8")
    save_ecnn(small, tmp_path / "small.ecnn", storage=plan)
    ratio = (tmp_path / "small.ecnn").stat().st_size / (tmp_path / "raw.ecnn").stat().st_size
    assert ratio < 0.35
    x = np.random.default_rng(0).random((4, 1, 3, 128, 128), dtype=np.float32)
    pruned_model, loaded_model = (
        Model(small, ONE_THREAD),
        Model(load_ecnn(tmp_path / "small.ecnn"), ONE_THREAD),
    )
    for sample in x:  # int8 storage moves the pruned model's logits by well under 2%
        expected = pruned_model(sample)
        assert np.abs(loaded_model(sample) - expected).max() < 0.02 * np.abs(expected).max()
    rows = tensor_rows(small, plan)
    assert [r.storage for r in rows] == ["int8"] * 4
    assert all(r.stored_bytes < r.raw_bytes / 3 and r.density == pytest.approx(0.3, abs=0.01) for r in rows)


def test_compare_reports_sizes_times_and_agreement(tmp_path: Path) -> None:
    graph = load_onnx(FACE_ONNX)
    save_ecnn(graph, tmp_path / "raw.ecnn")
    save_ecnn(graph, tmp_path / "same.ecnn", storage={"classifier.0.weight": "csr"})  # lossless
    same = compare(tmp_path / "raw.ecnn", tmp_path / "same.ecnn", samples=3, iterations=2, threads=1)
    assert same.max_abs_diff == 0.0 and same.top1_agreement == 1.0 and same.samples == 3
    assert same.after.file_bytes == (tmp_path / "same.ecnn").stat().st_size
    assert min(same.before.load_ms, same.after.load_ms, same.before.latency_ms, same.after.latency_ms) > 0
    small, plan = compress(graph, prune=0.02)
    save_ecnn(small, tmp_path / "tiny.ecnn", storage=plan)
    lossy = compare(tmp_path / "raw.ecnn", tmp_path / "tiny.ecnn", samples=2, iterations=1, threads=1)
    assert lossy.max_abs_diff > 0.1 and lossy.after.file_bytes < lossy.before.file_bytes / 5


def test_sensitivity_scan_prunes_one_layer_at_a_time() -> None:
    graph = net()
    inputs = [np.random.default_rng(i).standard_normal((1, 2, 4, 4)).astype(np.float32) for i in range(6)]
    score = agreement_score(graph, inputs)
    assert score(graph) == 1.0
    points = sensitivity(graph, score, layers=["fc1", "fc2"], keeps=(1.0, 0.5, 0.0))
    assert [(p.layer, p.keep) for p in points] == [(n, k) for n in ("fc1", "fc2") for k in (1.0, 0.5, 0.0)]
    assert points[0].score == 1.0  # keep 1.0 prunes nothing
    assert all(0.0 <= p.score <= 1.0 for p in points)
    assert score(prune(graph, 0.0)) < 1.0 or density(prune(graph, 0.0).initializers["fc2.w"]) == 0
    assert DEFAULT_KEEPS[0] == 0.95 and DEFAULT_KEEPS[-1] == 0.05 and len(DEFAULT_KEEPS) == 19
