"""Damaged and hostile .ecnn files: each defect is one ModelFormatError subclass that says what and where.

Most files here are re-assembled by ecnn_helpers with every checksum right, so the defect under
test is the only one and the check that is meant to catch it is the one that does.
"""

from __future__ import annotations

import copy
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ecnn_helpers import ENTRY, HEADER, Parts, assemble, reseal, small_cnn, split

import edgecnn
from edgecnn.errors import ModelFormatError, ModelNotFoundError
from edgecnn.format import (
    EcnnChecksumError,
    EcnnFormatError,
    EcnnUnsupportedError,
    EcnnVersionError,
    load_ecnn,
    read_sections,
    save_ecnn,
)
from edgecnn.ir.graph import Graph

TABLE = HEADER.size  # the section table starts right after the 64-byte header


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "good.ecnn"
    save_ecnn(small_cnn(), path)
    return path


@pytest.fixture
def parts(saved: Path) -> Parts:
    return split(saved)


def write(tmp_path: Path, raw: bytes) -> Path:
    path = tmp_path / "bad.ecnn"
    path.write_bytes(raw)
    return path


def entry_field(raw: bytes, index: int, field: int, value: int) -> bytes:
    """Set one field of section table entry ``index`` (fields: kind, flags, offset, length, crc)."""
    values = list(ENTRY.unpack_from(raw, TABLE + index * ENTRY.size))
    values[field] = value
    out = bytearray(raw)
    out[TABLE + index * ENTRY.size : TABLE + (index + 1) * ENTRY.size] = ENTRY.pack(*values)
    return reseal(out)


# ------------------------------------------------------------------ frame
def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError):
        load_ecnn(tmp_path / "absent.ecnn")
    with pytest.raises(ModelFormatError, match="directory"):
        load_ecnn(tmp_path)


def test_empty_file_and_wrong_magic(tmp_path: Path) -> None:
    with pytest.raises(EcnnFormatError, match="empty"):
        load_ecnn(write(tmp_path, b""))
    with pytest.raises(EcnnFormatError, match="magic"):
        load_ecnn(write(tmp_path, b"ONNX" + bytes(200)))
    with pytest.raises(EcnnFormatError, match="magic"):
        load_ecnn(write(tmp_path, b"EC"))


@pytest.mark.parametrize("keep", [4, 30, 63, 64, 100, 200, 1000, 2000, -33, -1])
def test_truncated_anywhere(tmp_path: Path, saved: Path, keep: int) -> None:
    raw = saved.read_bytes()
    with pytest.raises(EcnnFormatError, match="truncated"):
        load_ecnn(write(tmp_path, raw[:keep]))


def test_appended_bytes(tmp_path: Path, saved: Path) -> None:
    with pytest.raises(EcnnFormatError, match="extra bytes appended"):
        load_ecnn(write(tmp_path, saved.read_bytes() + b"\0"))


def test_newer_major_version_is_refused_with_a_clear_message(tmp_path: Path, parts: Parts) -> None:
    parts.major, parts.minor = 2, 3
    with pytest.raises(EcnnVersionError) as info:
        edgecnn.load(assemble(parts, tmp_path / "v2.ecnn"))
    assert "written by a newer edgecnn: format 2.x" in str(info.value)
    assert "this reader supports 1.x" in str(info.value)


def test_major_zero_is_refused(tmp_path: Path, parts: Parts) -> None:
    parts.major = 0
    with pytest.raises(EcnnVersionError, match="never released"):
        load_ecnn(assemble(parts, tmp_path / "v0.ecnn"))


def test_newer_minor_version_with_optional_flags_and_sections_loads(tmp_path: Path, parts: Parts) -> None:
    parts.minor, parts.flags = 9, 0x00010000
    parts.document["added_in_1_9"] = {"ignored": True}  # readers ignore keys they do not know
    parts.extra.append((77, 0, b"a future optional section"))
    graph = load_ecnn(assemble(parts, tmp_path / "v1_9.ecnn"), verify=True)
    assert graph.name == "small_cnn"
    assert [s.name for s in read_sections(tmp_path / "v1_9.ecnn")] == ["GRAPH", "DATA", "unknown(77)"]


def test_unknown_required_flag_or_section_is_refused(tmp_path: Path, parts: Parts) -> None:
    flagged = copy.deepcopy(parts)
    flagged.flags = 0x4
    with pytest.raises(EcnnVersionError, match="feature flag"):
        load_ecnn(assemble(flagged, tmp_path / "flag.ecnn"))
    parts.extra.append((77, 1, b"needed"))
    with pytest.raises(EcnnUnsupportedError, match="unknown kind 77"):
        load_ecnn(assemble(parts, tmp_path / "section.ecnn"))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda raw: reseal(raw[:12] + struct.pack("<I", 2**32 - 1) + raw[16:]), "section count"),
        (lambda raw: reseal(raw[:12] + struct.pack("<I", 0) + raw[16:]), "section count"),
        (lambda raw: reseal(raw[:12] + struct.pack("<I", 3) + raw[16:]), "section"),
        (lambda raw: reseal(raw[:16] + struct.pack("<Q", 2**64 - 1) + raw[24:]), "header says"),
        (lambda raw: entry_field(raw, 0, 2, ENTRY.unpack_from(raw, TABLE)[2] + 8), "not 64-aligned"),
        (lambda raw: entry_field(raw, 1, 3, 2**63), "outside the file body"),
        (lambda raw: entry_field(raw, 0, 2, 0), "outside the file body"),
        (lambda raw: entry_field(raw, 1, 2, ENTRY.unpack_from(raw, TABLE)[2]), "overlap"),
        (lambda raw: entry_field(raw, 1, 0, 1), "exactly one"),
        (lambda raw: entry_field(raw, 0, 0, 2), "exactly one"),
    ],
)
def test_hostile_header_fields(
    tmp_path: Path, saved: Path, edit: Callable[[bytes], bytes], message: str
) -> None:
    with pytest.raises(EcnnFormatError, match=message):
        load_ecnn(write(tmp_path, edit(saved.read_bytes())))


def test_header_crc_guards_header_and_table(tmp_path: Path, saved: Path) -> None:
    raw = bytearray(saved.read_bytes())
    raw[40] ^= 0x01  # a reserved header byte
    with pytest.raises(EcnnChecksumError, match="header CRC"):
        load_ecnn(write(tmp_path, bytes(raw)))
    with pytest.raises(EcnnChecksumError, match="header CRC"):
        read_sections(tmp_path / "bad.ecnn")


def test_graph_damage_is_caught_by_default_load(tmp_path: Path, saved: Path) -> None:
    raw = bytearray(saved.read_bytes())
    offset = ENTRY.unpack_from(raw, TABLE)[2]
    raw[offset + 10] ^= 0x20
    with pytest.raises(EcnnChecksumError, match="GRAPH section CRC"):
        load_ecnn(write(tmp_path, bytes(raw)))


def test_data_padding_and_digest_damage_is_caught_by_verify(tmp_path: Path, saved: Path) -> None:
    raw = saved.read_bytes()
    data_offset = ENTRY.unpack_from(raw, TABLE + ENTRY.size)[2]
    cases = {
        data_offset + 5: "DATA section CRC",  # inside a weight
        data_offset + 440: "DATA section CRC",  # padding between two blobs (inside DATA)
        data_offset - 1: "SHA-256",  # padding between GRAPH and DATA
        len(raw) - 1: "SHA-256",  # the digest itself
    }
    for at, message in cases.items():
        damaged = bytearray(raw)
        damaged[at] ^= 0x80
        path = write(tmp_path, bytes(damaged))
        assert isinstance(load_ecnn(path, verify=False), Graph)  # the trade-off: verify=False maps, not reads
        with pytest.raises(EcnnChecksumError, match=message):
            load_ecnn(path, verify=True)


def test_tensor_crc_is_checked_by_verify(tmp_path: Path, parts: Parts) -> None:
    parts.document["tensors"][2]["crc32"] ^= 1
    with pytest.raises(EcnnChecksumError, match=r"tensor 'fc\.w' CRC-32"):
        load_ecnn(assemble(parts, tmp_path / "crc.ecnn"), verify=True)


# ------------------------------------------------------------------- JSON
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\xff\xfe{}", "not UTF-8"),
        (b"{", "not valid JSON"),
        (b'{"name": NaN}', "non-standard JSON constant"),
        (b"[" * 200_000 + b"]" * 200_000, "cannot be parsed"),
        (b"1" * 5000, "cannot be parsed"),
        (b"[]", "expected an object"),
        (b"{}", "missing key 'tensors'"),
    ],
)
def test_graph_section_that_is_not_the_expected_json(
    tmp_path: Path, parts: Parts, body: bytes, message: str
) -> None:
    with pytest.raises(EcnnFormatError, match=message):
        load_ecnn(assemble(parts, tmp_path / "json.ecnn", graph_bytes=body))


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _delete(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return edit


T, N = "tensors", "nodes"
JSON_DEFECTS = [
    (_delete(("initializers",)), EcnnFormatError, "missing key 'initializers'"),
    (_delete(("inputs",)), EcnnFormatError, "missing key 'inputs'"),
    (_delete(("outputs",)), EcnnFormatError, "missing key 'outputs'"),
    (_delete(("nodes",)), EcnnFormatError, "missing key 'nodes'"),
    (_delete(("name",)), EcnnFormatError, "missing key 'name'"),
    (_delete(("metadata",)), EcnnFormatError, "missing key 'metadata'"),
    (_delete(("output_types",)), EcnnFormatError, "missing key 'output_types'"),
    (_set(("name",), 5), EcnnFormatError, r"GRAPH\.name.*expected a string|expected a string.*GRAPH\.name"),
    (_set(("inputs",), {}), EcnnFormatError, "expected a list"),
    (_set(("inputs", 0, "dtype"), "float128"), EcnnFormatError, "unknown dtype 'float128'"),
    (_set(("inputs", 0, "shape", 1), -1), EcnnFormatError, r"inputs\[0\]\.shape\[1\]"),
    (_set(("inputs", 0, "shape"), [1] * 40), EcnnFormatError, "rank 40"),
    (_set(("inputs", 0, "shape", 0), 1.5), EcnnFormatError, "expected an integer"),
    (_set(("metadata", "author"), 1), EcnnFormatError, r"metadata\.author"),
    (_set(("output_types",), {"logits": {"dtype": "float32"}}), EcnnFormatError, "missing key 'shape'"),
    (_set((N, 0), "conv"), EcnnFormatError, r"nodes\[0\]"),
    (_set((N, 0, "inputs", 1), 7), EcnnFormatError, r"inputs\[1\]"),
    (_delete((N, 0, "attrs")), EcnnFormatError, "missing key 'attrs'"),
    (_set((N, 0, "op"), "FancyConv"), EcnnUnsupportedError, "'conv' \\(FancyConv\\)"),
    (_set((N, 0, "inputs", 0), "nowhere"), EcnnFormatError, "reads 'nowhere'"),
    (_set(("outputs",), ["ghost"]), EcnnFormatError, "'ghost' is not produced"),
    (_set(("inputs", 0, "name"), ""), EcnnFormatError, r"empty name \(at GRAPH\.inputs\[0\]\)"),
    (_set(("outputs", 0), ""), EcnnFormatError, r"empty name \(at GRAPH\.outputs\[0\]\)"),
    (_set((N, 1, "inputs"), ["logits"]), EcnnFormatError, "cycle"),
    (_set((N, 1, "outputs"), ["c"]), EcnnFormatError, "produced twice"),
    (_set((N, 0, "attrs"), None), EcnnFormatError, "attrs is null, but this operator needs a ConvAttrs"),
    (_set((N, 0, "attrs", "group"), "one"), EcnnFormatError, r"attrs\.group"),
    (_set((N, 0, "attrs", "auto_pad"), "SOMETIMES"), EcnnFormatError, "not a valid AutoPad"),
    (_set((N, 0, "attrs", "dilation_rate"), 2), EcnnFormatError, "no field"),
    (_set((N, 0, "attrs", "kernel_shape"), [3, True]), EcnnFormatError, r"kernel_shape\[1\]"),
    (_set((N, 0, "attrs", "group"), 2**70), EcnnFormatError, "outside"),
    (_set((N, 5, "attrs", "value"), {"tensor": "missing"}), EcnnFormatError, "not in the tensor table"),
    (_set((N, 5, "attrs"), {}), EcnnFormatError, "missing required field 'value'"),
    (_set(("initializers",), ["conv.w", "conv.w"]), EcnnFormatError, "listed twice"),
    (_set(("initializers", 0), "ghost"), EcnnFormatError, "not in the tensor table"),
    (_set((T, 1, "name"), "conv.w"), EcnnFormatError, "appears twice"),
    (_set((T, 0, "dtype"), "complex64"), EcnnFormatError, "unknown dtype"),
    (_set((T, 0, "storage"), "zstd"), EcnnUnsupportedError, "storage 'zstd'"),
    (_set((T, 0, "offset"), 1), EcnnFormatError, "not 64-aligned"),
    (_set((T, 0, "offset"), 2**40), EcnnFormatError, r"tensors\[0\] 'conv\.w'\.offset"),
    (_set((T, 2, "offset"), 1792), EcnnFormatError, "run past the end"),
    (_set((T, 0, "nbytes"), 436), EcnnFormatError, "does not match"),
    (_set((T, 0, "shape"), [2**62, 2**62, 2**62]), EcnnFormatError, "does not match"),
    (_set((T, 0, "shape"), [1] * 33), EcnnFormatError, "rank 33"),
    (_set((T, 0, "shape", 0), -4), EcnnFormatError, r"shape\[0\]"),
    (_set((T, 0, "crc32"), -1), EcnnFormatError, "crc32"),
    (_delete((T, 0, "crc32")), EcnnFormatError, "missing key 'crc32'"),
    (_set((T,), {}), EcnnFormatError, "GRAPH.tensors"),
]


@pytest.mark.parametrize(("edit", "error", "message"), JSON_DEFECTS)
def test_valid_json_that_describes_a_wrong_graph(
    tmp_path: Path, parts: Parts, edit: Callable[[dict[str, Any]], None], error: type, message: str
) -> None:
    edit(parts.document)
    with pytest.raises(error, match=message):
        load_ecnn(assemble(parts, tmp_path / "doc.ecnn"), verify=True)


def test_bool_tensor_with_bytes_other_than_0_and_1(tmp_path: Path, parts: Parts) -> None:
    parts.document["tensors"][1].update(dtype="bool", shape=[16])
    with pytest.raises(EcnnFormatError, match=r"bool tensor 'conv\.b'"):
        load_ecnn(assemble(parts, tmp_path / "bool.ecnn"))


def test_errors_name_the_file(tmp_path: Path, parts: Parts) -> None:
    parts.document["nodes"][2]["attrs"]["ceil_mode"] = "yes"
    path = assemble(parts, tmp_path / "named.ecnn")
    with pytest.raises(EcnnFormatError) as info:
        load_ecnn(path)
    assert str(path) in str(info.value)
    assert "GRAPH.nodes[2] 'pool' (MaxPool).attrs.ceil_mode" in str(info.value)
