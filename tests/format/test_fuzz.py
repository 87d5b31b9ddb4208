"""Mutation fuzzing of a small saved model, stored raw and with the float16/int8/csr storages: whatever
the damage, load_ecnn returns a Graph or raises ModelFormatError (never another exception, a crash or
a hang), and verify=True catches any flipped bit."""

from __future__ import annotations

import copy
import os
import struct
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ecnn_helpers import (
    COMPRESSED_PLAN,
    ENTRY,
    HEADER,
    Parts,
    assemble,
    compressed_cnn,
    reseal,
    small_cnn,
    split,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.errors import ModelFormatError
from edgecnn.format import load_ecnn, save_ecnn
from edgecnn.ir.graph import Graph

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# (byte offset, struct format) of every header field and of the first three section-table slots
FIELDS = [(4, "<H"), (6, "<H"), (8, "<I"), (12, "<I"), (16, "<Q"), (24, "<I")] + [
    (HEADER.size + i * ENTRY.size + at, fmt)
    for i in range(3)
    for at, fmt in [(0, "<I"), (4, "<I"), (8, "<Q"), (16, "<Q"), (24, "<I")]
]
INTERESTING = [0, 1, 2, 63, 64, 65, 127, 128, 2**15, 2**16 - 1, 2**31 - 1, 2**31, 2**32 - 1, 2**63, 2**64 - 1]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ecnn_fuzz")


@pytest.fixture(scope="module", params=["raw", "compressed"])
def saved(workdir: Path, request: pytest.FixtureRequest) -> Path:
    path = workdir / f"{request.param}.ecnn"
    if request.param == "raw":
        save_ecnn(small_cnn(), path)
    else:
        save_ecnn(compressed_cnn(), path, storage=COMPRESSED_PLAN)
    return path


@pytest.fixture(scope="module")
def original(saved: Path) -> bytes:
    return saved.read_bytes()


@pytest.fixture(scope="module")
def original_parts(saved: Path) -> Parts:
    return split(saved)


def outcome(workdir: Path, raw: bytes, verify: bool) -> Graph | ModelFormatError:
    """Load ``raw`` from a fresh file (a new inode, so no earlier mapping sees it change)."""
    fd, name = tempfile.mkstemp(dir=workdir, suffix=".ecnn")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        try:
            return load_ecnn(name, verify=verify)
        except ModelFormatError as err:
            return err
    finally:
        os.unlink(name)


def assert_graph_or_format_error(workdir: Path, raw: bytes) -> None:
    for verify in (False, True):
        result = outcome(workdir, raw, verify)
        assert isinstance(result, (Graph, ModelFormatError))


@FUZZ
@given(data=st.data())
def test_truncated_and_byte_flipped_files(workdir: Path, original: bytes, data: st.DataObject) -> None:
    raw = bytearray(original)
    if data.draw(st.booleans(), "truncate"):
        del raw[data.draw(st.integers(0, len(raw) - 1), "keep") :]
    for _ in range(data.draw(st.integers(0, 8), "flips")):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1), "at")] ^= data.draw(st.integers(1, 255), "mask")
    if data.draw(st.booleans(), "reseal"):  # make the header CRC and digest right again, so deeper checks run
        raw = bytearray(reseal(raw)) if len(raw) >= HEADER.size else raw
    assert_graph_or_format_error(workdir, bytes(raw))


@FUZZ
@given(data=st.data())
def test_header_and_section_table_fields_overwritten(
    workdir: Path, original: bytes, data: st.DataObject
) -> None:
    raw = bytearray(original)
    for _ in range(data.draw(st.integers(1, 3), "fields")):
        at, fmt = data.draw(st.sampled_from(FIELDS), "field")
        top = 2 ** (8 * struct.calcsize(fmt)) - 1
        value = data.draw(
            st.one_of(st.sampled_from([v for v in INTERESTING if v <= top]), st.integers(0, top))
        )
        struct.pack_into(fmt, raw, at, value)
    if data.draw(st.booleans(), "reseal"):
        raw = bytearray(reseal(raw))
    assert_graph_or_format_error(workdir, bytes(raw))


def json_paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from json_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from json_paths(item, (*prefix, i))


JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False),
        st.text(max_size=8),
        st.sampled_from(
            [
                "float32",
                "raw",
                "Conv",
                "x",
                "conv.w",
                "NOTSET",
                "inf",
                "csr",
                "int8",
                "float16",
                "nnz",
                "axis",
            ]
        ),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=8,
)


@FUZZ
@given(data=st.data())
def test_graph_json_values_replaced_with_intact_checksums(
    workdir: Path, original: bytes, original_parts: Parts, data: st.DataObject
) -> None:
    parts = copy.deepcopy(original_parts)
    paths = [p for p in json_paths(parts.document) if p]
    for _ in range(data.draw(st.integers(1, 3), "edits")):
        path = data.draw(st.sampled_from(paths), "path")
        target = parts.document
        try:
            for key in path[:-1]:
                target = target[key]
            if data.draw(st.booleans(), "delete"):
                del target[path[-1]]
            else:
                target[path[-1]] = data.draw(JSON_VALUES, "value")
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed or replaced this path
    fd, name = tempfile.mkstemp(dir=workdir, suffix=".ecnn")  # a new file: rewriting one is slow here
    os.close(fd)
    try:
        raw = assemble(parts, Path(name)).read_bytes()
    finally:
        os.unlink(name)
    assert_graph_or_format_error(workdir, raw)


@FUZZ
@given(data=st.data())
def test_blob_bytes_changed_with_intact_checksums(
    workdir: Path, original_parts: Parts, data: st.DataObject
) -> None:
    """Damage inside a tensor's blob that no checksum reports: the storage's own checks must hold."""
    parts = copy.deepcopy(original_parts)
    entry = data.draw(st.sampled_from(parts.document["tensors"]), "tensor")
    start, length = entry["offset"], entry["nbytes"]
    blob = bytearray(parts.data[start : start + length])
    for _ in range(data.draw(st.integers(1, 6), "edits")):
        at = data.draw(st.integers(0, max(length - 1, 0)), "at")
        if blob:
            blob[at] = data.draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]) | st.integers(0, 255), "byte")
    parts.data = parts.data[:start] + bytes(blob) + parts.data[start + length :]
    entry["crc32"] = zlib.crc32(bytes(blob))
    fd, name = tempfile.mkstemp(dir=workdir, suffix=".ecnn")
    os.close(fd)
    try:
        raw = assemble(parts, Path(name)).read_bytes()
    finally:
        os.unlink(name)
    assert_graph_or_format_error(workdir, raw)


@FUZZ
@given(data=st.data())
def test_any_flipped_bit_is_caught_by_verify(workdir: Path, original: bytes, data: st.DataObject) -> None:
    bit = data.draw(st.integers(0, 8 * len(original) - 1), "bit")
    raw = bytearray(original)
    raw[bit // 8] ^= 1 << (bit % 8)
    assert isinstance(outcome(workdir, bytes(raw), verify=True), ModelFormatError)
    assert isinstance(outcome(workdir, bytes(raw), verify=False), (Graph, ModelFormatError))


def test_every_byte_flipped_is_caught_by_verify(workdir: Path, original: bytes) -> None:
    missed = []
    for at in range(len(original)):
        raw = bytearray(original)
        raw[at] ^= 1 << (at % 8)
        if not isinstance(outcome(workdir, bytes(raw), verify=True), ModelFormatError):
            missed.append(at)
    assert missed == []


def test_the_mutants_base_file_loads(workdir: Path, original: bytes, original_parts: Parts) -> None:
    """Guards the fuzz tests against passing vacuously on files that never load."""
    assert isinstance(outcome(workdir, original, verify=True), Graph)
    reassembled = assemble(copy.deepcopy(original_parts), workdir / "reassembled.ecnn")
    assert isinstance(outcome(workdir, reassembled.read_bytes(), verify=True), Graph)
