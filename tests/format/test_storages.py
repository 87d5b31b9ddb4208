"""Storages float16, int8 and csr (format 1.1): round trips, the bytes the spec describes, writer refusals."""

from __future__ import annotations

import struct
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from ecnn_helpers import small_cnn, split
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from edgecnn.errors import GraphError
from edgecnn.format import (
    STORAGE_READERS,
    EcnnUnsupportedError,
    StorageChoice,
    load_ecnn,
    read_header,
    save_ecnn,
    stored_nbytes,
)
from edgecnn.importers.onnx import load_onnx
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.registry import NoAttrs

FACE_ONNX = Path(str(resources.files("edgecnn") / "data" / "simplecnn" / "face_binary_cls.onnx"))
ALL = ["raw", "float16", "int8", "int8:axis=1", "csr", "csr:float16", "csr:int8", "csr:float32"]


def holder(array: np.ndarray) -> Graph:
    """A graph whose only job is to hold ``w`` (y = x + w)."""
    spec = TensorSpec("x", array.dtype.name, tuple(array.shape))
    return Graph([spec], ["y"], [Node("Add", "add", ["x", "w"], ["y"], NoAttrs())], {"w": array})


def round_trip(tmp_path: Path, array: np.ndarray, storage: str) -> np.ndarray:
    path = tmp_path / "w.ecnn"
    save_ecnn(holder(array), path, storage={"w": storage})
    return load_ecnn(path, verify=True).initializers["w"]


def pruned(shape: tuple[int, ...], density: float, seed: int = 0, dtype: str = "float32") -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(shape).astype(dtype)
    return np.where(rng.random(shape) < density, w, 0).astype(dtype)


def expected_int8(w: np.ndarray, axis: int) -> np.ndarray:
    """The spec's quantiser, written independently: scale = max|w| / 127 per index of ``axis``."""
    moved = np.moveaxis(w.astype(np.float32), axis, 0)
    flat = moved.reshape(moved.shape[0], int(np.prod(moved.shape[1:])))
    amax = np.abs(flat).max(axis=1) if flat.shape[1] else np.zeros(flat.shape[0], np.float32)
    scales = (amax / np.float32(127)).astype(np.float32)
    q = np.clip(np.rint(flat / np.where(scales > 0, scales, 1)[:, None]), -127, 127)
    back = (q.astype(np.float32) * scales[:, None]).reshape(moved.shape)
    return np.moveaxis(back, 0, axis).astype(w.dtype)


# ------------------------------------------------------------------ round trips
@pytest.mark.parametrize("shape", [(13, 7), (5, 3, 3, 3), (17,), (0, 4), (3, 0), (1, 1)])
@pytest.mark.parametrize("storage", ALL)
def test_round_trip_of_every_storage(tmp_path: Path, shape: tuple[int, ...], storage: str) -> None:
    w = pruned(shape, 0.4)
    if storage == "int8:axis=1" and len(shape) < 2:
        storage = "int8"
    loaded = round_trip(tmp_path, w, storage)
    assert loaded.dtype == w.dtype and loaded.shape == w.shape
    assert not loaded.flags.writeable
    choice = StorageChoice.parse(storage)
    if storage in ("raw", "csr", "csr:float32"):
        assert np.array_equal(loaded, w)
    elif choice.kind == "float16" or choice.values == "float16":
        assert np.array_equal(loaded, w.astype(np.float16).astype(np.float32))
    else:
        assert np.array_equal(loaded, expected_int8(w, choice.axis))
    if choice.kind == "csr":  # zeros stay exactly zero, whatever the value type
        assert np.array_equal(loaded == 0, w == 0) or choice.values == "int8"
        assert np.all(loaded[w == 0] == 0)


@settings(max_examples=60, deadline=None)
@given(
    w=hnp.arrays(
        st.sampled_from([np.float32, np.float64, np.float16]),
        hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=6),
        elements=st.one_of(st.just(0.0), st.floats(-1e3, 1e3, width=16)),
    ),
    storage=st.sampled_from(["csr", "csr:float16", "float16"]),
)
def test_hypothesis_lossless_and_half_round_trips(
    tmp_path_factory: pytest.TempPathFactory, w: np.ndarray, storage: str
) -> None:
    loaded = round_trip(tmp_path_factory.mktemp("h"), w, storage)
    assert loaded.dtype == w.dtype
    expected = w if storage == "csr" else w.astype(np.float16).astype(w.dtype)
    assert np.array_equal(loaded, expected)


def test_int8_error_is_at_most_half_a_step_per_channel(tmp_path: Path) -> None:
    w = pruned((64, 9, 3, 3), 1.0) * np.linspace(0.01, 10, 64, dtype=np.float32)[:, None, None, None]
    loaded = round_trip(tmp_path, w, "int8")
    step = np.abs(w).reshape(64, -1).max(axis=1) / 127
    err = np.abs(loaded - w).reshape(64, -1).max(axis=1)
    assert np.all(err <= step / 2 * (1 + 1e-5))
    assert np.all(err > 0)  # it is a lossy storage: the test would notice a raw fallback


def test_csr_keeps_nan_and_inf_and_float16_keeps_them_too(tmp_path: Path) -> None:
    w = np.array([[0, np.nan, 0], [np.inf, 0, -np.inf]], np.float32)
    for storage in ("csr", "float16", "csr:float16"):
        assert np.array_equal(round_trip(tmp_path, w, storage), w, equal_nan=True)


def test_a_compressed_model_runs_with_the_decoded_weights(tmp_path: Path) -> None:
    graph = load_onnx(FACE_ONNX)
    plan = {"38": "int8", "41": "float16", "44": "csr:int8", "classifier.0.weight": "csr"}
    path = tmp_path / "face.ecnn"
    save_ecnn(graph, path, storage=plan)
    loaded = load_ecnn(path, verify=True)
    assert read_header(path).minor == 1
    x = np.random.default_rng(3).random((1, 3, 128, 128), dtype=np.float32)
    decoded = graph.copy()
    decoded.initializers.update({k: np.asarray(loaded.initializers[k]) for k in plan})
    assert np.array_equal(Model(loaded)(x), Model(decoded)(x))
    assert np.array_equal(
        loaded.initializers["classifier.0.weight"], graph.initializers["classifier.0.weight"]
    )
    reference = Model(graph)(x)
    assert np.abs(Model(loaded)(x) - reference).max() < 0.01 * np.abs(reference).max()
    for name in set(graph.initializers) - set(plan):  # biases stayed raw: bit-identical
        assert np.array_equal(loaded.initializers[name], graph.initializers[name])


# ------------------------------------------------------------------ bytes and sizes
def test_csr_bytes_follow_the_spec(tmp_path: Path) -> None:
    w = np.array([[0, 2, 0, 3], [0, 0, 0, 0], [5, 0, 0, 0]], np.float32)
    path = tmp_path / "w.ecnn"
    save_ecnn(holder(w), path, storage={"w": "csr"})
    parts = split(path)
    (entry,) = parts.document["tensors"]
    assert (entry["storage"], entry["nnz"], entry["values"], entry["nbytes"]) == ("csr", 3, "float32", 140)
    blob = parts.data[entry["offset"] : entry["offset"] + entry["nbytes"]]
    assert struct.unpack_from("<4i", blob, 0) == (0, 2, 2, 3)  # indptr
    assert struct.unpack_from("<3i", blob, 64) == (1, 3, 0)  # indices, at the next 64-byte boundary
    assert struct.unpack_from("<3f", blob, 128) == (2.0, 3.0, 5.0)  # values


def test_int8_bytes_follow_the_spec(tmp_path: Path) -> None:
    w = np.array([[1.0, -0.5], [0.0, 0.0], [-254.0, 127.0]], np.float32)
    path = tmp_path / "w.ecnn"
    save_ecnn(holder(w), path, storage={"w": "int8"})
    parts = split(path)
    (entry,) = parts.document["tensors"]
    assert (entry["storage"], entry["axis"], entry["nbytes"]) == ("int8", 0, 64 + 6)
    blob = parts.data[entry["offset"] : entry["offset"] + entry["nbytes"]]
    assert struct.unpack_from("<3f", blob, 0) == pytest.approx((1 / 127, 0.0, 2.0))
    assert struct.unpack_from("<6b", blob, 64) == (127, -64, 0, 0, -127, 64)  # -63.5 rounds to even


@pytest.mark.parametrize("storage", ALL)
def test_stored_nbytes_predicts_the_blob(tmp_path: Path, storage: str) -> None:
    w = pruned((33, 5, 3), 0.3, seed=4)
    path = tmp_path / "w.ecnn"
    save_ecnn(holder(w), path, storage={"w": storage})
    assert split(path).document["tensors"][0]["nbytes"] == stored_nbytes(w, storage)


def test_sizes_shrink_as_expected() -> None:
    w = pruned((256, 1024), 0.1, seed=5)
    raw = stored_nbytes(w, "raw")
    assert stored_nbytes(w, "float16") == raw // 2
    assert stored_nbytes(w, "int8") == raw // 4 + 1024
    assert stored_nbytes(w, "csr") < 0.21 * raw
    assert stored_nbytes(w, "csr:int8") < 0.14 * raw


# ------------------------------------------------------------------ version marks and refusals
def test_raw_files_stay_format_1_0_and_others_are_1_1(tmp_path: Path) -> None:
    save_ecnn(small_cnn(), tmp_path / "raw.ecnn")
    save_ecnn(small_cnn(), tmp_path / "explicit.ecnn", storage={"conv.w": "raw"})
    save_ecnn(small_cnn(), tmp_path / "half.ecnn", storage={"conv.w": "float16"})
    assert (tmp_path / "raw.ecnn").read_bytes() == (tmp_path / "explicit.ecnn").read_bytes()
    assert read_header(tmp_path / "raw.ecnn").minor == 0
    assert read_header(tmp_path / "half.ecnn").minor == 1


@pytest.mark.parametrize("storage", ["float16", "int8", "csr"])
def test_a_reader_without_the_storage_refuses_it_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage: str
) -> None:
    path = tmp_path / "w.ecnn"
    save_ecnn(small_cnn(), path, storage={"fc.w": storage})
    monkeypatch.delitem(STORAGE_READERS, storage)
    with pytest.raises(EcnnUnsupportedError, match=f"tensor 'fc.w' uses storage '{storage}'"):
        load_ecnn(path)


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ({"ghost": "int8"}, "does not hold: ghost"),
        ({"fc.w": "zstd"}, "unknown storage 'zstd'"),
        ({"fc.w": "int8:axis=2"}, "has no axis 2"),
        ({"fc.w": "int8:scale=2"}, "takes ':axis=N'"),
        ({"fc.w": "float16:x"}, "takes no option"),
        ({"fc.w": "csr:int16"}, "values must be one of"),
        ({"fc.w": 8}, "is a string"),
    ],
)
def test_bad_storage_plans_are_graph_errors(tmp_path: Path, plan: dict, message: str) -> None:
    with pytest.raises(GraphError, match=message):
        save_ecnn(small_cnn(), tmp_path / "bad.ecnn", storage=plan)
    assert list(tmp_path.iterdir()) == []  # no half-written file


@pytest.mark.parametrize(
    ("array", "storage", "message"),
    [
        (np.arange(6, dtype=np.int64), "float16", "holds floating-point tensors only"),
        (np.arange(6, dtype=np.int32).reshape(2, 3), "csr", "holds floating-point tensors only"),
        (np.float32(2.0), "int8", "has no axis 0"),
        (np.float32(2.0), "csr", "a scalar has no rows"),
        (np.array([1e5, 1], np.float32), "float16", "overflows float16"),
        (np.array([[0, 7e4]], np.float32), "csr:float16", "overflows float16"),
        (np.array([1, np.nan], np.float32), "int8", "need finite values"),
        (np.array([[0, np.inf]], np.float32), "csr:int8", "need finite values"),
    ],
)
def test_arrays_a_storage_cannot_hold(tmp_path: Path, array: np.ndarray, storage: str, message: str) -> None:
    with pytest.raises(GraphError, match=message):
        save_ecnn(holder(np.asarray(array)), tmp_path / "bad.ecnn", storage={"w": storage})


def test_storage_choice_text_forms() -> None:
    for text in ["raw", "float16", "int8", "int8:axis=3", "csr", "csr:int8", "csr:float16"]:
        assert str(StorageChoice.parse(text)) == text
    assert StorageChoice.parse("int8:axis=1") == StorageChoice("int8", axis=1)
    assert StorageChoice.parse(StorageChoice("csr", "int8")) == StorageChoice("csr", "int8")
