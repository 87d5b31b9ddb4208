"""``load_ecnn``: map a .ecnn file and rebuild its Graph; arrays are read-only views of the file.

Default checks are those that cost no pass over the weights (header CRC, GRAPH CRC, every tensor's
place and size); ``verify=True`` also reads every byte (section and tensor CRCs, SHA-256).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import zlib
from pathlib import Path
from typing import Any, NoReturn

from edgecnn.errors import ModelFormatError, ModelNotFoundError
from edgecnn.format.checked_json import CheckedJson
from edgecnn.format.errors import EcnnChecksumError, EcnnFormatError
from edgecnn.format.graph_codec import decode_graph
from edgecnn.format.layout import DIGEST_SIZE, Header, SectionInfo, SectionKind, parse_frame
from edgecnn.format.tensors import DataSection, read_tensor_table
from edgecnn.ir.graph import Graph


def _map(path: str | os.PathLike[str]) -> tuple[mmap.mmap | None, int, str]:
    """Map the whole file read-only (None for an empty file, which cannot be mapped)."""
    file = Path(path)
    if not file.exists():
        raise ModelNotFoundError(f"model file not found: {file}")
    if file.is_dir():
        raise ModelFormatError(f"{file} is a directory, not a model file")
    try:
        with open(file, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
    except OSError as err:
        raise ModelFormatError(f"{file}: cannot read: {err.strerror or err}") from None
    return mapped, size, str(file)


def read_header(path: str | os.PathLike[str]) -> Header:
    """Check and decode the header and section table only (for ``edgecnn info``)."""
    mapped, size, source = _map(path)
    if mapped is None:
        raise EcnnFormatError(source, "the file is empty")
    with mapped:
        return parse_frame(mapped, size, source)


def read_sections(path: str | os.PathLike[str]) -> list[SectionInfo]:
    """The section table of a .ecnn file, after checking the header and its CRC."""
    return list(read_header(path).sections)


def load_ecnn(path: str | os.PathLike[str], *, verify: bool = False) -> Graph:
    """Read a .ecnn file into a Graph whose initializers are read-only views of the mapped file.

    ``verify=True`` reads every byte to check each CRC-32 and the SHA-256 (a full pass over the
    weights); the default checks only what load needs to be safe, so it takes milliseconds.
    """
    mapped, size, source = _map(path)
    if mapped is None:
        raise EcnnFormatError(source, "the file is empty")
    header = parse_frame(mapped, size, source)
    graph_section = header.section(SectionKind.GRAPH)
    graph_bytes = mapped[graph_section.offset : graph_section.offset + graph_section.length]
    _check_crc(graph_section, zlib.crc32(graph_bytes), source)
    if verify:
        _verify_all(mapped, header, source)
    check = CheckedJson(source)
    document = _parse_json(graph_bytes, graph_section.offset, check)
    data_section = header.section(SectionKind.DATA)
    data = DataSection(mapped, data_section.offset, data_section.length)
    if not isinstance(document, dict):
        check.fail("expected an object", "GRAPH")
    tensors = read_tensor_table(check.member(document, "tensors", list, "GRAPH"), data, verify, check)
    return decode_graph(document, tensors, check)


def _check_crc(section: SectionInfo, computed: int, source: str) -> None:
    if computed != section.crc32:
        raise EcnnChecksumError(
            source,
            f"{section.name} section CRC-32 mismatch: stored {section.crc32:#010x}, computed {computed:#010x}",
            f"file bytes [{section.offset}, {section.offset + section.length})",
        )


def _verify_all(mapped: mmap.mmap, header: Header, source: str) -> None:
    """Every section's CRC, then the SHA-256 that also covers the header, padding and gaps."""
    with memoryview(mapped) as view:
        for section in header.sections:
            _check_crc(section, zlib.crc32(view[section.offset : section.offset + section.length]), source)
        body_end = header.file_size - DIGEST_SIZE
        computed = hashlib.sha256(view[:body_end]).digest()
        stored = bytes(view[body_end:])
    if computed != stored:
        raise EcnnChecksumError(
            source,
            f"SHA-256 mismatch: stored {stored.hex()[:16]}..., computed {computed.hex()[:16]}...",
            f"file bytes [{body_end}, {header.file_size})",
        )


def _parse_json(raw: bytes, offset: int, check: CheckedJson) -> Any:
    def refuse_constant(name: str) -> NoReturn:
        check.fail(f"non-standard JSON constant {name}", "GRAPH")

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        check.fail(f"the GRAPH section is not UTF-8: {err.reason}", f"file byte {offset + err.start}")
    try:
        return json.loads(text, parse_constant=refuse_constant)
    except json.JSONDecodeError as err:
        check.fail(f"the GRAPH section is not valid JSON: {err.msg}", f"GRAPH character {err.pos}")
    except (ValueError, RecursionError) as err:  # e.g. an integer with too many digits, or nesting too deep
        check.fail(f"the GRAPH section cannot be parsed: {type(err).__name__}: {err}", "GRAPH")
