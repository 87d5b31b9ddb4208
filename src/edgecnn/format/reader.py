"""``load_ecnn``: map a .ecnn file and rebuild its Graph; arrays are read-only views of the file.

Always checked: the header CRC, the GRAPH CRC, every tensor's place and size, the memory the
decoded tensors take in total. By default the weights' CRC too, in files small enough that the
pass costs little; ``verify=True`` reads every byte (section and tensor CRCs, SHA-256). Encrypted
files are opened in memory and signed ones checked on request (docs/security.md).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import zlib
from typing import Any, NoReturn

from edgecnn.errors import ModelFormatError
from edgecnn.format.checked_json import CheckedJson
from edgecnn.format.errors import EcnnChecksumError, EcnnFormatError
from edgecnn.format.graph_codec import decode_graph
from edgecnn.format.keys import KeyLike, key_source
from edgecnn.format.layout import (
    DIGEST_SIZE,
    Header,
    SectionInfo,
    SectionKind,
    authenticated_frame,
    parse_frame,
)
from edgecnn.format.sealing import Opener
from edgecnn.format.signature import PUBLIC_KEY_BYTES, check_signature
from edgecnn.format.tensors import DataSection, read_tensor_table
from edgecnn.ir.graph import Graph
from edgecnn.limits import MemoryBudget, Tally, regular_file_size


def _map(path: str | os.PathLike[str]) -> tuple[mmap.mmap | None, int, str]:
    """Map the whole file read-only (None for an empty file, which cannot be mapped); devices,
    FIFOs and directories are refused before they are opened."""
    source = os.fspath(path)
    regular_file_size(source)
    try:
        with open(source, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
    except OSError as err:
        raise ModelFormatError(f"{source}: cannot read: {err.strerror or err}") from None
    return mapped, size, source


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


DEFAULT_VERIFY_MAX_BYTES = 256 << 20
"""``verify=None`` checks the DATA section's CRC-32 in files up to this size: one pass over the
weights (its cost per MiB is in docs/security.md), which the first run would mostly pay anyway by
faulting the pages in; larger files are mapped without being read."""


def load_ecnn(
    path: str | os.PathLike[str],
    *,
    verify: bool | None = None,
    key: KeyLike | None = None,
    verify_signature: Any = None,
    budget: MemoryBudget | None = None,
) -> Graph:
    """Read a .ecnn file into a Graph; raw arrays are read-only views of the mapped file.

    ``verify``: None (default) checks the weights' CRC-32 in files up to DEFAULT_VERIFY_MAX_BYTES
    (an encrypted file's GCM tags already check every byte); True reads every byte to check each
    CRC-32 and the SHA-256; False checks only what load needs to be safe (milliseconds at any size).
    ``key`` opens an encrypted file (bytes, a key file, a callback or a KeySource; an explicit key
    refuses a file that is not encrypted). ``verify_signature`` (an Ed25519 public key, its PEM or
    PEM file) refuses a file that is not signed by it, or was changed after signing. ``budget``
    bounds the memory decoded and decrypted tensors take (default: MemoryBudget.default()).
    """
    mapped, size, source = _map(path)
    if mapped is None:
        raise EcnnFormatError(source, "the file is empty")
    header = parse_frame(mapped, size, source)
    tally = (budget or MemoryBudget.default()).tally(source, ModelFormatError)
    if verify_signature is not None:
        check_signature(mapped, header, verify_signature, source)
    graph_section = header.section(SectionKind.GRAPH)
    data_section = header.section(SectionKind.DATA)
    graph_stored = mapped[graph_section.offset : graph_section.offset + graph_section.length]
    _check_crc(graph_section, zlib.crc32(graph_stored), source)
    if verify:
        _verify_all(mapped, header, source)
    check_tensors = bool(verify)
    if header.encrypted:
        opener = _opener(mapped, header, key, source)
        graph_bytes = bytes(_open_section(opener, mapped, graph_section, tally))
        plain = _open_section(opener, mapped, data_section, tally)
        data = DataSection(plain, 0, len(plain))
    else:
        source_key = key_source(key) if key is not None else None
        if source_key is not None and source_key.required:
            raise EcnnFormatError(source, "a key was given but the file is not encrypted")
        graph_bytes = graph_stored
        data = DataSection(mapped, data_section.offset, data_section.length)
        if verify is None and size <= DEFAULT_VERIFY_MAX_BYTES:
            check_tensors = _crc_of(mapped, data_section) != data_section.crc32
    check = CheckedJson(source)
    document = _parse_json(graph_bytes, graph_section.offset, check)
    if not isinstance(document, dict):
        check.fail("expected an object", "GRAPH")
    tensors = read_tensor_table(
        check.member(document, "tensors", list, "GRAPH"), data, check_tensors, check, tally
    )
    if check_tensors and not verify:  # the DATA CRC failed but no tensor's: the damage is in padding
        _check_crc(data_section, _crc_of(mapped, data_section), source)
    return decode_graph(document, tensors, check)


def _opener(mapped: mmap.mmap, header: Header, key: KeyLike | None, source: str) -> Opener:
    if key is None:
        raise EcnnFormatError(
            source,
            "the file is encrypted: pass its model key (edgecnn.load(path, key=...), or set "
            "EDGECNN_MODEL_KEY_FILE)",
        )
    record = header.section(SectionKind.ENCRYPTION)
    frame = authenticated_frame(mapped, len(header.sections))
    return Opener(key_source(key).key(), mapped[record.offset : record.offset + record.length], frame, source)


def _open_section(opener: Opener, mapped: mmap.mmap, section: SectionInfo, tally: Tally) -> memoryview:
    plain = opener.plain_length(section.length, section.name)
    tally.add(plain, f"the decrypted {section.name} section")
    with memoryview(mapped) as view:
        return opener.open(section.kind, view[section.offset : section.offset + section.length], plain)


def _crc_of(mapped: mmap.mmap, section: SectionInfo) -> int:
    """The CRC-32 of a section's bytes, read through the mapping (no copy)."""
    with memoryview(mapped) as view:
        return _section_crc(view, section)


def _check_crc(section: SectionInfo, computed: int, source: str) -> None:
    if computed != section.crc32:
        raise EcnnChecksumError(
            source,
            f"{section.name} section CRC-32 mismatch: stored {section.crc32:#010x}, computed {computed:#010x}",
            f"file bytes [{section.offset}, {section.offset + section.length})",
        )


def _section_crc(view: memoryview, section: SectionInfo) -> int:
    """A section's CRC-32 as the table defines it: a signature's own bytes are taken as zero."""
    body = view[section.offset : section.offset + section.length]
    if section.kind == SectionKind.SIGNATURE:
        keep = min(len(body), PUBLIC_KEY_BYTES)
        return zlib.crc32(bytes(len(body) - keep), zlib.crc32(body[:keep]))
    return zlib.crc32(body)


def _verify_all(mapped: mmap.mmap, header: Header, source: str) -> None:
    """Every section's CRC, then the SHA-256 that also covers the header, padding and gaps."""
    with memoryview(mapped) as view:
        for section in header.sections:
            _check_crc(section, _section_crc(view, section), source)
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
