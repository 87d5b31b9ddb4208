"""Storages "zlib" and "lzma" (format 1.2): round trips over every wrapped storage, version marks,
storage-choice syntax, and hostile streams (damaged, truncated, trailing bytes, too short, expanding
past the size the entry implies) that must be ModelFormatErrors without decoding more than that."""

from __future__ import annotations

import copy
import lzma
import os
import tempfile
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ecnn_helpers import Parts, assemble, compressed_cnn, split
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.errors import GraphError, ModelFormatError
from edgecnn.format import EcnnFormatError, load_ecnn, read_header, save_ecnn, stored_nbytes
from edgecnn.format.blob import lay_out
from edgecnn.format.codec import StorageChoice
from edgecnn.format.csr_codec import CsrCodec
from edgecnn.format.entropy_codec import blob_bytes, delta_shuffle
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.registry import NoAttrs

CODERS = ("zlib", "lzma")
NESTED = "storage 'zlib' wraps one of raw, float16, int8, csr, not 'zlib'"
FLOAT_STORAGES = ("raw", "float16", "int8", "int8:axis=1", "csr", "csr:float16", "csr:int8")


def one_tensor_graph(array: np.ndarray) -> Graph:
    spec = TensorSpec("x", array.dtype.name, tuple(array.shape))
    return Graph([spec], ["y"], [Node("Add", "add", ["x", "w"], ["y"], NoAttrs())], {"w": array})


def saved(tmp_path: Path, array: np.ndarray, storage: str, name: str = "a.ecnn") -> Path:
    path = tmp_path / name
    save_ecnn(one_tensor_graph(array), path, storage={"w": storage})
    return path


def pruned_matrix(seed: int, shape: tuple[int, int] = (12, 40), density: float = 0.3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(shape).astype(np.float32)
    return np.where(rng.random(shape) < density, w, 0).astype(np.float32)


# ------------------------------------------------------------------ round trips
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    storage=st.sampled_from(FLOAT_STORAGES),
    coder=st.sampled_from(CODERS),
    rows=st.integers(1, 9),
    cols=st.integers(2, 33),
    density=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    seed=st.integers(0, 2**16),
)
def test_entropy_coding_decodes_to_what_the_wrapped_storage_gives(
    tmp_path: Path, storage: str, coder: str, rows: int, cols: int, density: float, seed: int
) -> None:
    w = pruned_matrix(seed, (rows, cols), density)
    plain = load_ecnn(saved(tmp_path, w, storage, "plain.ecnn"), verify=True).initializers["w"]
    path = saved(tmp_path, w, f"{storage}+{coder}", "coded.ecnn")
    coded = load_ecnn(path, verify=True).initializers["w"]
    assert coded.dtype == plain.dtype and coded.shape == plain.shape
    np.testing.assert_array_equal(coded, plain)
    assert not coded.flags.writeable
    assert stored_nbytes(w, f"{storage}+{coder}") == split(path).document["tensors"][0]["nbytes"]


@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool", "float64"])
def test_raw_tensors_of_any_dtype_round_trip(tmp_path: Path, dtype: str) -> None:
    array = (np.arange(60).reshape(3, 4, 5) % 3).astype(dtype)
    back = load_ecnn(saved(tmp_path, array, "raw+lzma"), verify=True).initializers["w"]
    assert back.dtype == array.dtype
    np.testing.assert_array_equal(back, array)


def test_empty_tensor_round_trips(tmp_path: Path) -> None:
    back = load_ecnn(saved(tmp_path, np.zeros((0, 3), np.float32), "csr+zlib")).initializers["w"]
    assert back.shape == (0, 3)


def test_compressible_weights_get_smaller(tmp_path: Path) -> None:
    w = pruned_matrix(0, (64, 256), 0.15)
    sizes = {s: saved(tmp_path, w, s, f"{s}.ecnn").stat().st_size for s in ("csr:int8", "csr:int8+zlib")}
    assert sizes["csr:int8+zlib"] < 0.8 * sizes["csr:int8"]


def test_files_are_marked_with_the_lowest_version_that_reads_them(tmp_path: Path) -> None:
    w = pruned_matrix(1)
    assert read_header(saved(tmp_path, w, "raw", "a.ecnn")).minor == 0
    assert read_header(saved(tmp_path, w, "csr", "b.ecnn")).minor == 1
    assert read_header(saved(tmp_path, w, "raw+zlib", "c.ecnn")).minor == 2
    entry = split(tmp_path / "c.ecnn").document["tensors"][0]
    assert entry["storage"] == "zlib" and entry["inner"] == {"storage": "raw"}


# --------------------------------------------------------------- choice syntax
@pytest.mark.parametrize(
    "text", ["raw+zlib", "csr+lzma", "csr:int8+zlib", "int8:axis=1+lzma", "float16+zlib", "csr:float16+lzma"]
)
def test_storage_choice_text_round_trips(text: str) -> None:
    choice = StorageChoice.parse(text)
    assert str(choice) == text and choice.entropy in CODERS and choice.inner.entropy is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("csr+gzip", "unknown entropy coder 'gzip'"),
        ("+zlib", "one storage and one entropy coder"),
        ("csr+zlib+lzma", "one storage and one entropy coder"),
    ],
)
def test_bad_storage_choices(text: str, message: str) -> None:
    with pytest.raises(GraphError, match=message):
        StorageChoice.parse(text)


@pytest.mark.parametrize("storage", ["zlib", "lzma"])
def test_a_coder_is_not_a_storage_of_its_own(tmp_path: Path, storage: str) -> None:
    with pytest.raises(GraphError, match=f"unknown storage '{storage}'"):
        saved(tmp_path, pruned_matrix(0), storage)


# ------------------------------------------------------------- hostile streams
def coded_parts(tmp_path: Path, coder: str, storage: str = "csr:int8") -> Parts:
    return split(saved(tmp_path, pruned_matrix(2), f"{storage}+{coder}", "good.ecnn"))


def with_stream(parts: Parts, stream: bytes, coded_nbytes: int | None = None) -> Parts:
    """Replace the only tensor's stream, with a consistent entry (sizes, CRC-32) unless told."""
    entry = parts.document["tensors"][0]
    parts.data = parts.data[: entry["offset"]] + stream
    entry["nbytes"] = len(stream)
    entry["coded_nbytes"] = len(stream) if coded_nbytes is None else coded_nbytes
    entry["crc32"] = zlib.crc32(stream)
    return parts


def stream_of(parts: Parts) -> bytes:
    entry = parts.document["tensors"][0]
    return parts.data[entry["offset"] : entry["offset"] + entry["nbytes"]]


def coded(coder: str, blob: bytes) -> bytes:
    return zlib.compress(blob) if coder == "zlib" else lzma.compress(blob, format=lzma.FORMAT_XZ)


def load(tmp_path: Path, parts: Parts, verify: bool = True) -> Graph:
    return load_ecnn(assemble(parts, tmp_path / "bad.ecnn"), verify=verify)


def decoded_blob(tmp_path: Path, parts: Parts, coder: str) -> bytes:
    stream = stream_of(parts)
    return zlib.decompress(stream) if coder == "zlib" else lzma.decompress(stream)


@pytest.mark.parametrize("coder", CODERS)
def test_the_good_file_loads(tmp_path: Path, coder: str) -> None:
    graph = load(tmp_path, coded_parts(tmp_path, coder))
    assert graph.initializers["w"].shape == (12, 40)


@pytest.mark.parametrize("coder", CODERS)
def test_damaged_stream(tmp_path: Path, coder: str) -> None:
    parts = coded_parts(tmp_path, coder)
    stream = bytearray(stream_of(parts))
    for at in range(len(stream) // 3, len(stream) // 3 + 8):
        stream[at] ^= 0x5A
    with pytest.raises(EcnnFormatError, match=f"the {coder} stream is damaged") as info:
        load(tmp_path, with_stream(parts, bytes(stream)))
    assert "GRAPH.tensors[0] 'w'" in str(info.value) and "file bytes [" in str(info.value)


@pytest.mark.parametrize("coder", CODERS)
def test_truncated_stream(tmp_path: Path, coder: str) -> None:
    parts = coded_parts(tmp_path, coder)
    with pytest.raises(EcnnFormatError, match=f"the {coder} stream is damaged"):
        load(tmp_path, with_stream(parts, stream_of(parts)[:-9]))


@pytest.mark.parametrize("coder", CODERS)
def test_bytes_after_the_stream(tmp_path: Path, coder: str) -> None:
    parts = coded_parts(tmp_path, coder)
    with pytest.raises(EcnnFormatError, match="bytes follow the end of the coded stream"):
        load(tmp_path, with_stream(parts, stream_of(parts) + b"\x00tail"))


@pytest.mark.parametrize("coder", CODERS)
def test_stream_shorter_than_the_entry_implies(tmp_path: Path, coder: str) -> None:
    parts = coded_parts(tmp_path, coder)
    blob = decoded_blob(tmp_path, parts, coder)
    with pytest.raises(EcnnFormatError, match=rf"decodes to {len(blob) - 1} bytes, but its entry implies"):
        load(tmp_path, with_stream(parts, coded(coder, blob[:-1])))


@pytest.mark.parametrize("coder", CODERS)
def test_a_stream_that_expands_past_its_entry_is_not_expanded(tmp_path: Path, coder: str) -> None:
    """A 'bomb': an entry for 16 bytes whose stream would expand to 64 MiB. Decoding stops at 17."""
    parts = split(saved(tmp_path, np.ones(4, np.float32), f"raw+{coder}", "small.ecnn"))
    bomb = coded(coder, bytes(64 << 20))
    parts = with_stream(parts, bomb)
    path = assemble(parts, tmp_path / "bomb.ecnn")
    tracemalloc.start()
    try:
        with pytest.raises(EcnnFormatError, match="decodes to more than the 16 bytes its entry implies"):
            load_ecnn(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"decoding allocated {peak} bytes"  # lzma: its 8 MiB dictionary


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda e: e.update(inner={"storage": "zlib", "inner": {"storage": "raw"}}), NESTED),
        (lambda e: e.update(inner={"storage": "fancy"}), "wraps one of .*, not 'fancy'"),
        (lambda e: e.pop("inner"), "inner"),
        (lambda e: e.update(inner=[]), "inner"),
        (lambda e: e["inner"].update(nnz=10**6), "nnz"),
        (lambda e: e["inner"].update(values="int4"), "csr values must be one of"),
        (lambda e: e.update(coded_nbytes=-1), "coded_nbytes"),
        (lambda e: e.update(filter="bwt"), "unknown filter 'bwt'"),
        (lambda e: e.pop("filter"), "filter"),
        (lambda e: e.update(coded_nbytes=e["coded_nbytes"] + 1), "nbytes .* does not match"),
        (lambda e: e.update(shape=[2**20, 2**20]), "decodes to"),
    ],
)
def test_entry_defects(tmp_path: Path, edit: Any, message: str) -> None:
    parts = coded_parts(tmp_path, "zlib")
    edit(parts.document["tensors"][0])
    with pytest.raises(EcnnFormatError, match=message):
        load(tmp_path, parts)


@pytest.mark.parametrize("coder", CODERS)
def test_the_decoded_blob_gets_the_wrapped_storages_checks(tmp_path: Path, coder: str) -> None:
    """A well-formed stream of a bad CSR blob: the csr checks run and say where in the stream."""
    parts = coded_parts(tmp_path, coder)
    layout = CsrCodec().layout("float32", (12, 40), parts.document["tensors"][0]["inner"])
    blob = delta_shuffle(layout, bytearray(decoded_blob(tmp_path, parts, coder)), inverse=True)
    blob[64:68] = (99).to_bytes(4, "little", signed=True)  # indices[0] (indptr is int32[13] at 0)
    stream = coded(coder, bytes(delta_shuffle(layout, blob)))
    with pytest.raises(EcnnFormatError, match=r"column index 99 is outside 0\.\.39") as info:
        load(tmp_path, with_stream(parts, stream))
    assert f"indices[0] at byte of the decoded {coder} stream 64" in str(info.value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(coder=st.sampled_from(CODERS), data=st.data())
def test_fuzzed_streams_load_or_raise_model_format_error(
    tmp_path: Path, coder: str, data: st.DataObject
) -> None:
    """Random byte edits of the stream, CRCs kept right: a Graph (equal to the original where it
    loads, since both coders check their own checksum) or a ModelFormatError, nothing else."""
    parts = copy.deepcopy(FUZZ_BASE[coder])
    stream = bytearray(stream_of(parts))
    for _ in range(data.draw(st.integers(1, 4), "edits")):
        stream[data.draw(st.integers(0, len(stream) - 1), "at")] = data.draw(st.integers(0, 255), "byte")
    cut = data.draw(st.integers(0, 3), "cut")
    edited = bytes(stream[: len(stream) - cut])
    fd, name = tempfile.mkstemp(suffix=".ecnn")
    os.close(fd)
    try:
        try:
            graph = load_ecnn(assemble(with_stream(parts, edited), Path(name)))
        except ModelFormatError:
            return
        np.testing.assert_array_equal(graph.initializers["w"], FUZZ_EXPECTED)
    finally:
        os.unlink(name)


def _fuzz_base() -> tuple[dict[str, Parts], np.ndarray]:
    folder = Path(tempfile.mkdtemp(prefix="edgecnn-entropy-fuzz-"))
    bases = {c: split(saved(folder, pruned_matrix(2), f"csr:int8+{c}", f"{c}.ecnn")) for c in CODERS}
    expected = load_ecnn(folder / "zlib.ecnn").initializers["w"]
    for c in CODERS:
        (folder / f"{c}.ecnn").unlink()
    folder.rmdir()
    return bases, np.array(expected)


FUZZ_BASE, FUZZ_EXPECTED = _fuzz_base()


def test_a_whole_model_with_every_storage_coded(tmp_path: Path) -> None:
    graph = compressed_cnn()
    plan = {"conv.w": "int8+lzma", "conv.b": "float16+zlib", "fc.w": "csr:int8+zlib", "fc.b": "raw+lzma"}
    save_ecnn(graph, tmp_path / "m.ecnn", storage=plan)
    back = load_ecnn(tmp_path / "m.ecnn", verify=True)
    save_ecnn(graph, tmp_path / "plain.ecnn", storage={k: v.split("+")[0] for k, v in plan.items()})
    plain = load_ecnn(tmp_path / "plain.ecnn")
    for name in plan:
        np.testing.assert_array_equal(back.initializers[name], plain.initializers[name])


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(
        st.tuples(
            st.sampled_from(["int8", "int32", "uint16", "int64", "float32", "float16"]), st.integers(0, 50)
        ),
        min_size=1,
        max_size=4,
    ),
    seed=st.integers(0, 2**16),
)
def test_delta_shuffle_is_undone_exactly(parts: list[tuple[str, int]], seed: int) -> None:
    rng = np.random.default_rng(seed)
    layout = lay_out([(f"p{i}", dtype, count) for i, (dtype, count) in enumerate(parts)])
    arrays = {
        f"p{i}": rng.integers(0, 256, count * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)
        for i, (dtype, count) in enumerate(parts)
    }
    original = blob_bytes(layout, arrays)
    filtered = delta_shuffle(layout, bytearray(original))
    assert delta_shuffle(layout, filtered, inverse=True) == original


def test_sorted_indices_become_small_byte_planes() -> None:
    layout = lay_out([("indices", "int32", 6)])
    blob = blob_bytes(layout, {"indices": np.array([3, 5, 9, 70000, 70001, 2], np.int32)})
    planes = np.frombuffer(bytes(delta_shuffle(layout, blob)), np.uint8).reshape(4, 6)
    deltas = np.array([3, 2, 4, 69991, 1, -69999], np.int64) % 2**32
    np.testing.assert_array_equal(planes.T.copy().view("<u4").reshape(-1), deltas)


@pytest.mark.parametrize("coder", CODERS)
def test_an_unfiltered_stream_reads(tmp_path: Path, coder: str) -> None:
    """Filter "none": the stream codes the blob itself (what a writer without the filter produces)."""
    parts = coded_parts(tmp_path, coder)
    entry = parts.document["tensors"][0]
    layout = CsrCodec().layout("float32", (12, 40), entry["inner"])
    blob = delta_shuffle(layout, bytearray(decoded_blob(tmp_path, parts, coder)), inverse=True)
    expected = load(tmp_path, copy.deepcopy(parts)).initializers["w"]
    parts = with_stream(parts, coded(coder, bytes(blob)))
    parts.document["tensors"][0]["filter"] = "none"
    np.testing.assert_array_equal(load(tmp_path, parts).initializers["w"], expected)
