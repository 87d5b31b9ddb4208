"""Hostile float16/int8/csr entries and blobs: each defect is a ModelFormatError that says what and where.

Blobs are edited with every checksum made right again (the tensor's CRC-32 in the table, the section
CRCs and the SHA-256), so the structural check under test is the one that catches the defect."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ecnn_helpers import Parts, assemble, split

from edgecnn.format import EcnnChecksumError, EcnnFormatError, EcnnUnsupportedError, load_ecnn, save_ecnn
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.registry import NoAttrs

# 3 x 4 with 3 non-zeros. csr:int8 layout (docs/formats/ecnn.md): indptr int32[4] at 0, indices int32[3]
# at 64, values int8[3] at 128, scales float32[3] at 192; 204 bytes.
W = np.array([[0, 2, 0, 3], [0, 0, 0, 0], [5, 0, 0, 0]], np.float32)
INDPTR, INDICES, VALUES, SCALES = 0, 64, 128, 192


def saved_parts(tmp_path: Path, storage: str, array: np.ndarray = W) -> Parts:
    spec = TensorSpec("x", "float32", tuple(array.shape))
    graph = Graph([spec], ["y"], [Node("Add", "add", ["x", "w"], ["y"], NoAttrs())], {"w": array})
    path = tmp_path / "good.ecnn"
    save_ecnn(graph, path, storage={"w": storage})
    return split(path)


def with_blob_edit(parts: Parts, at: int, fmt: str, *values: Any) -> Parts:
    """Write ``values`` at byte ``at`` of the tensor's blob and fix its CRC-32 in the table."""
    entry = parts.document["tensors"][0]
    data = bytearray(parts.data)
    struct.pack_into(fmt, data, entry["offset"] + at, *values)
    parts.data = bytes(data)
    entry["crc32"] = zlib.crc32(parts.data[entry["offset"] : entry["offset"] + entry["nbytes"]])
    return parts


def load(tmp_path: Path, parts: Parts, verify: bool = True) -> Graph:
    return load_ecnn(assemble(parts, tmp_path / "bad.ecnn"), verify=verify)


BLOB_DEFECTS = [
    ((INDPTR, "<i", 1), r"indptr\[0\] is 1, not 0"),
    ((INDPTR + 12, "<i", 2), r"indptr\[3\] is 2, but nnz is 3"),
    ((INDPTR + 4, "<i", 3), r"indptr decreases: indptr\[2\] = 2 < indptr\[1\] = 3"),
    ((INDPTR + 4, "<i", -1), r"indptr decreases"),
    ((INDICES + 4, "<i", 4), r"column index 4 is outside 0\.\.3"),
    ((INDICES + 8, "<i", -(2**31)), r"column index -2147483648 is outside"),
    ((INDICES, "<i", 3), r"column indices of row 0 are not strictly increasing \(3 then 3\)"),
    ((INDICES, "<2i", 3, 1), r"row 0 are not strictly increasing \(3 then 1\)"),
    ((VALUES + 2, "<b", -128), r"int8 value -128 is outside the symmetric range"),
    ((SCALES + 4, "<f", float("nan")), r"scale nan is not a finite non-negative number"),
    ((SCALES + 8, "<f", -1.0), r"scale -1\.0 is not a finite non-negative number"),
    ((SCALES, "<f", float("inf")), r"scale inf"),
]


@pytest.mark.parametrize(("edit", "message"), BLOB_DEFECTS)
def test_csr_blob_defects(tmp_path: Path, edit: tuple[Any, ...], message: str) -> None:
    parts = with_blob_edit(saved_parts(tmp_path, "csr:int8"), *edit)
    with pytest.raises(EcnnFormatError, match=message) as info:
        load(tmp_path, parts)
    assert "GRAPH.tensors[0] 'w'" in str(info.value) and "at file byte" in str(info.value)


def test_structure_is_checked_without_verify_and_bytes_only_with_it(tmp_path: Path) -> None:
    parts = saved_parts(tmp_path, "csr:int8")
    data = bytearray(parts.data)
    data[parts.document["tensors"][0]["offset"] + INDICES + 4] = 9  # index 9 > 3, CRC left stale
    parts.data = bytes(data)
    with pytest.raises(EcnnFormatError, match="column index 9"):
        load(tmp_path, parts, verify=False)
    with pytest.raises(EcnnChecksumError, match="tensor 'w' CRC-32 mismatch"):
        load(tmp_path, parts, verify=True)


def test_int8_dense_defects(tmp_path: Path) -> None:
    parts = with_blob_edit(saved_parts(tmp_path, "int8"), 64 + 5, "<b", -128)
    with pytest.raises(EcnnFormatError, match=r"-128.*values\[5\] at file byte"):
        load(tmp_path, parts)
    parts = with_blob_edit(saved_parts(tmp_path, "int8"), 0, "<f", -0.5)
    with pytest.raises(EcnnFormatError, match=r"scale -0\.5.*scales\[0\]"):
        load(tmp_path, parts)


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(entry: dict[str, Any]) -> None:
        entry[key] = value

    return edit


def _delete(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda entry: entry.pop(key)


ENTRY_DEFECTS = [
    ("csr:int8", _delete("nnz"), EcnnFormatError, "missing key 'nnz'"),
    (
        "csr:int8",
        _set("nnz", 13),
        EcnnFormatError,
        r"13 is outside 0\.\.12 \(at GRAPH\.tensors\[0\] 'w'\.nnz\)",
    ),
    ("csr:int8", _set("nnz", -1), EcnnFormatError, "outside"),
    ("csr:int8", _set("nnz", "3"), EcnnFormatError, "expected an integer"),
    (
        "csr:int8",
        _set("nnz", 0),
        EcnnFormatError,
        r"nbytes 204 does not match float32\[3, 4\] stored as 'csr'",
    ),
    ("csr:int8", _set("nnz", 2), EcnnFormatError, r"indptr\[3\] is 3, but nnz is 2"),  # same blob size
    ("csr:int8", _set("values", "int4"), EcnnFormatError, "csr values must be one of"),
    ("csr:int8", _set("values", "float32"), EcnnFormatError, "does not match"),
    ("csr:int8", _delete("values"), EcnnFormatError, "missing key 'values'"),
    ("csr:int8", _set("dtype", "int32"), EcnnFormatError, "holds floating-point tensors, not int32"),
    ("csr:int8", _set("shape", []), EcnnFormatError, "rank 1 or more"),
    ("csr:int8", _set("shape", [1, 2**31]), EcnnFormatError, "do not fit the int32 column indices"),
    ("int8", _delete("axis"), EcnnFormatError, "missing key 'axis'"),
    ("int8", _set("axis", 2), EcnnFormatError, r"2 is outside 0\.\.1 \(at GRAPH\.tensors\[0\] 'w'\.axis\)"),
    ("int8", _set("axis", "0"), EcnnFormatError, "expected an integer"),
    ("int8", _set("shape", []), EcnnFormatError, "rank 1 or more"),
    ("float16", _set("dtype", "int64"), EcnnFormatError, "holds floating-point tensors, not int64"),
    (
        "float16",
        _set("nbytes", 16),
        EcnnFormatError,
        r"nbytes 16 does not match float32\[3, 4\] stored as 'float16' \(24 bytes\)",
    ),
]


@pytest.mark.parametrize(("storage", "edit", "error", "message"), ENTRY_DEFECTS)
def test_entry_defects(
    tmp_path: Path, storage: str, edit: Callable[[dict[str, Any]], None], error: type, message: str
) -> None:
    parts = saved_parts(tmp_path, storage)
    edit(parts.document["tensors"][0])
    with pytest.raises(error, match=message):
        load(tmp_path, parts)


def test_a_csr_entry_cannot_ask_for_a_huge_dense_array(tmp_path: Path) -> None:
    """4 x (2**31 - 1) float32 would be 32 GiB from a 64-byte blob: refused before any allocation."""
    parts = saved_parts(tmp_path, "csr", np.zeros((4, 1), np.float32))
    entry = parts.document["tensors"][0]
    assert entry["nbytes"] == 64  # indptr int32[5]; indices and values empty at offset 64
    entry["shape"] = [4, 2**31 - 1]
    with pytest.raises(
        EcnnUnsupportedError, match=r"decodes to 34359738352 bytes, more than this reader's limit"
    ):
        load(tmp_path, parts)
