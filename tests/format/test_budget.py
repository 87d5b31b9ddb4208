"""The .ecnn reader's memory budget: the decoded size of every tensor, added up over the whole
file, is refused before the first one is decoded or inflated (a few KB of file must not take GBs)."""

from __future__ import annotations

import resource
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
from ecnn_helpers import Parts, assemble, split

import edgecnn
from edgecnn.errors import ModelFormatError
from edgecnn.format import load_ecnn, save_ecnn
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.limits import MemoryBudget
from edgecnn.ops.registry import NoAttrs

GIB = 1 << 30


def _with_tensors(parts: Parts, entries: list[dict[str, object]], blobs: list[bytes]) -> Parts:
    """Append tensors (and their blobs, at aligned offsets) to a file's table and DATA."""
    data = bytearray(parts.data)
    for entry, blob in zip(entries, blobs, strict=True):
        data += bytes(-len(data) % 64)
        entry.update(offset=len(data), nbytes=len(blob), crc32=zlib.crc32(blob))
        data += blob
        parts.document["tensors"].append(entry)
        parts.document["initializers"].append(entry["name"])
    parts.data = bytes(data)
    return parts


def _peak_while(call: object) -> tuple[int, int, BaseException]:
    """(tracemalloc peak, growth of the process's peak RSS in bytes, the exception ``call`` raised)."""
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    try:
        call()  # type: ignore[operator]
    except BaseException as exc:
        raised = exc
    else:
        raise AssertionError("the load did not fail")
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss_before, raised


def test_twenty_csr_tensors_of_1_gib_in_8_kb(tmp_path: Path) -> None:
    """The issue's case: each empty CSR tensor of shape [1, 2**28] float32 declares 1 GiB dense."""
    relu = Graph([TensorSpec("x", "float32", (1, 4))], ["y"], [Node("Relu", "relu", ["x"], ["y"], NoAttrs())])
    save_ecnn(relu, tmp_path / "base.ecnn")
    indptr = np.zeros(2, "<i4").tobytes() + bytes(56)  # empty indices and values start at 64
    entries: list[dict[str, object]] = [
        {
            "name": f"huge{i}",
            "dtype": "float32",
            "shape": [1, 2**28],
            "storage": "csr",
            "nnz": 0,
            "values": "float32",
        }
        for i in range(20)
    ]
    path = assemble(
        _with_tensors(split(tmp_path / "base.ecnn"), entries, [indptr] * 20), tmp_path / "bomb.ecnn"
    )
    assert path.stat().st_size < 8192
    for load in (
        lambda: load_ecnn(path, budget=MemoryBudget(16 * GIB)),
        lambda: edgecnn.load(path, memory_limit=16 * GIB),
    ):
        peak, rss_growth, raised = _peak_while(load)
        assert isinstance(raised, ModelFormatError), raised
        assert "tensor 'huge16' (GRAPH.tensors[16]) needs 1.0 GiB" in str(raised) and "memory limit" in str(
            raised
        )
        assert peak < 16 << 20 and rss_growth < 256 << 20


def test_entropy_coded_tensors_are_refused_before_inflating(tmp_path: Path, cnn_graph: Graph) -> None:
    save_ecnn(cnn_graph, tmp_path / "base.ecnn")
    coder = zlib.compressobj(1)
    stream = b"".join(coder.compress(bytes(16 << 20)) for _ in range(4)) + coder.flush()  # 64 MiB of zeros
    entries: list[dict[str, object]] = [
        {
            "name": f"zeros{i}",
            "dtype": "float32",
            "shape": [16 << 20],
            "storage": "zlib",
            "inner": {"storage": "raw"},
            "filter": "none",
            "coded_nbytes": len(stream),
        }
        for i in range(3)
    ]
    path = assemble(
        _with_tensors(split(tmp_path / "base.ecnn"), entries, [stream] * 3), tmp_path / "zip.ecnn"
    )
    assert path.stat().st_size < 1 << 20
    peak, _, raised = _peak_while(lambda: load_ecnn(path, budget=MemoryBudget(150 << 20)))
    assert isinstance(raised, ModelFormatError) and "zeros2" in str(raised), raised
    assert peak < 16 << 20, "a tensor was inflated before the total was checked"
    one = assemble(_with_tensors(split(tmp_path / "base.ecnn"), entries[:1], [stream]), tmp_path / "one.ecnn")
    graph = load_ecnn(one, budget=MemoryBudget(150 << 20))  # within the budget it loads
    assert graph.initializers["zeros0"].nbytes == 64 << 20 and not graph.initializers["zeros0"].any()


def test_budget_default_is_the_active_one(
    tmp_path: Path, cnn_graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoded storages count; raw (memory-mapped) ones do not."""
    path = tmp_path / "m.ecnn"
    save_ecnn(cnn_graph, path, storage={"fc.w": "float16"})
    decoded = np.asarray(cnn_graph.initializers["fc.w"]).nbytes
    with pytest.raises(ModelFormatError, match=r"tensor 'fc\.w'"):
        load_ecnn(path, budget=MemoryBudget(decoded - 1))
    assert load_ecnn(path, budget=MemoryBudget(decoded)).name == cnn_graph.name
    with pytest.raises(ModelFormatError, match="memory limit"):
        edgecnn.load(path, memory_limit=decoded - 1)
