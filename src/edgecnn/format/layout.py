"""The fixed binary frame of a .ecnn file: header, section table and trailer (docs/formats/ecnn.md).

Everything here is about bytes at known places; what the sections contain is read elsewhere.
"""

from __future__ import annotations

import enum
import itertools
import mmap
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from edgecnn.format.errors import EcnnChecksumError, EcnnFormatError, EcnnUnsupportedError, EcnnVersionError

MAGIC = b"ECNN"
FORMAT_MAJOR = 1
FORMAT_MINOR = 3
"""1.1 added the storages float16, int8 and csr, 1.2 the entropy coders zlib and lzma, 1.3
encrypted and signed files; the writer marks each file with the lowest version that has every
feature it uses (1.0 for raw only)."""
PROTECTED_MINOR = 3
"""The minor version of files that are encrypted or signed."""
ALIGNMENT = 64
"""Every section and every tensor blob starts at a multiple of this many bytes from the file start."""

HEADER = struct.Struct("<4sHHIIQI36x")
"""magic, major, minor, flags, section count, file size, header CRC-32, 36 reserved bytes."""
SECTION_ENTRY = struct.Struct("<IIQQII")
"""kind, section flags, offset, length, CRC-32, reserved."""
HEADER_CRC_AT = 24
"""Byte offset of the header CRC field (taken as zero while computing it)."""
ENTRY_CRC_AT = 24
"""Byte offset of the CRC field inside a section table entry."""
DIGEST_SIZE = 32
"""The file ends with the SHA-256 of every byte before it."""
MIN_FILE_SIZE = HEADER.size + SECTION_ENTRY.size + DIGEST_SIZE
MAX_SECTIONS = 64

REQUIRED_FLAGS_MASK = 0x0000FFFF
"""Header flag bits a reader must understand to read the file; the upper 16 bits are optional hints."""
FLAG_ENCRYPTED = 0x1
"""Required flag (format 1.3): the GRAPH and DATA sections are encrypted (an ENCRYPTION section says how)."""
KNOWN_REQUIRED_FLAGS = FLAG_ENCRYPTED
"""Required flags this reader implements."""
SECTION_REQUIRED = 0x1
"""Section flag: a reader that does not know this section's kind must refuse the file."""


class SectionKind(enum.IntEnum):
    GRAPH = 1
    DATA = 2
    ENCRYPTION = 3
    """format 1.3, required: the key derivation salt and scheme of an encrypted file."""
    SIGNATURE = 4
    """format 1.3, optional: an Ed25519 signature of every byte before it (the last section)."""


REQUIRED_ONCE = (SectionKind.GRAPH, SectionKind.DATA)
AT_MOST_ONCE = (SectionKind.ENCRYPTION, SectionKind.SIGNATURE)


@dataclass(frozen=True)
class SectionInfo:
    """One entry of the section table, as ``edgecnn info`` shows it."""

    kind: int
    name: str  # "GRAPH", "DATA", or "unknown(<kind>)"
    offset: int
    length: int
    crc32: int
    required: bool


@dataclass(frozen=True)
class Header:
    major: int
    minor: int
    flags: int
    file_size: int
    header_crc32: int
    sections: tuple[SectionInfo, ...]

    def section(self, kind: SectionKind) -> SectionInfo:
        return next(s for s in self.sections if s.kind == kind)

    def find(self, kind: SectionKind) -> SectionInfo | None:
        return next((s for s in self.sections if s.kind == kind), None)

    @property
    def encrypted(self) -> bool:
        return bool(self.flags & FLAG_ENCRYPTED)


def align(offset: int) -> int:
    """The first multiple of ALIGNMENT at or after ``offset``."""
    return -(-offset // ALIGNMENT) * ALIGNMENT


def section_name(kind: int) -> str:
    return SectionKind(kind).name if kind in SectionKind._value2member_map_ else f"unknown({kind})"


def table_end(count: int) -> int:
    return HEADER.size + count * SECTION_ENTRY.size


def pack_frame(
    flags: int, file_size: int, sections: Sequence[SectionInfo], minor: int = FORMAT_MINOR
) -> bytes:
    """Header plus section table, with the header CRC filled in; ``minor`` is the version the file needs."""
    table = b"".join(
        SECTION_ENTRY.pack(s.kind, SECTION_REQUIRED if s.required else 0, s.offset, s.length, s.crc32, 0)
        for s in sections
    )
    unsigned = HEADER.pack(MAGIC, FORMAT_MAJOR, minor, flags, len(sections), file_size, 0)
    crc = zlib.crc32(unsigned + table)
    return HEADER.pack(MAGIC, FORMAT_MAJOR, minor, flags, len(sections), file_size, crc) + table


def parse_frame(buf: bytes | memoryview | mmap.mmap, actual_size: int, source: str) -> Header:
    """Check and decode the header and section table of a file of ``actual_size`` bytes.

    ``buf`` holds at least the file's first ``min(actual_size, table end)`` bytes. Checks run in an
    order that never trusts a field before what protects it has been checked.
    """
    if actual_size < len(MAGIC) or bytes(buf[: len(MAGIC)]) != MAGIC:
        raise EcnnFormatError(
            source, "not an .ecnn file: it does not start with the magic bytes b'ECNN'", "byte 0"
        )
    if actual_size < HEADER.size:
        raise EcnnFormatError(source, f"truncated: {actual_size} bytes, the header alone needs {HEADER.size}")
    _, major, minor, flags, count, file_size, header_crc = HEADER.unpack_from(buf, 0)
    if major > FORMAT_MAJOR:
        raise EcnnVersionError(
            source,
            f"written by a newer edgecnn: format {major}.x (file says {major}.{minor}), "
            f"this reader supports {FORMAT_MAJOR}.x; upgrade edgecnn to read it",
            "byte 4",
        )
    if major < 1:
        raise EcnnVersionError(source, f"format version {major}.{minor} was never released", "byte 4")
    if count < 2 or count > MAX_SECTIONS:
        raise EcnnFormatError(source, f"section count {count} is outside 2..{MAX_SECTIONS}", "byte 12")
    if actual_size < table_end(count) + DIGEST_SIZE:
        raise EcnnFormatError(
            source,
            f"truncated: {actual_size} bytes, but the header and {count}-entry section table "
            f"and digest need {table_end(count) + DIGEST_SIZE}",
        )
    table = bytes(buf[HEADER.size : table_end(count)])
    unsigned = bytearray(buf[: HEADER.size])
    unsigned[HEADER_CRC_AT : HEADER_CRC_AT + 4] = bytes(4)
    computed = zlib.crc32(bytes(unsigned) + table)
    if computed != header_crc:
        raise EcnnChecksumError(
            source,
            f"header CRC-32 mismatch: stored {header_crc:#010x}, computed {computed:#010x} "
            "(the header or section table is damaged)",
            f"byte {HEADER_CRC_AT}",
        )
    if file_size != actual_size:
        raise EcnnFormatError(
            source,
            f"the header says the file is {file_size} bytes but it is {actual_size} "
            f"({'truncated' if actual_size < file_size else 'extra bytes appended'})",
            "byte 16",
        )
    unknown_required = flags & REQUIRED_FLAGS_MASK & ~KNOWN_REQUIRED_FLAGS
    if unknown_required:
        raise EcnnVersionError(
            source,
            f"the file needs feature flag(s) {unknown_required:#06x}, unknown to this reader "
            f"(format {FORMAT_MAJOR}.{FORMAT_MINOR}; file is {major}.{minor}); upgrade edgecnn",
            "byte 8",
        )
    sections = _parse_table(table, count, file_size, source)
    header = Header(major, minor, flags, file_size, header_crc, sections)
    check_protection_sections(header, source)
    return header


def _parse_table(table: bytes, count: int, file_size: int, source: str) -> tuple[SectionInfo, ...]:
    first_free = table_end(count)
    last_end = file_size - DIGEST_SIZE
    sections = []
    for i in range(count):
        where = f"section table entry {i}, byte {HEADER.size + i * SECTION_ENTRY.size}"
        kind, sflags, offset, length, crc, _ = SECTION_ENTRY.unpack_from(table, i * SECTION_ENTRY.size)
        info = SectionInfo(kind, section_name(kind), offset, length, crc, bool(sflags & SECTION_REQUIRED))
        if offset % ALIGNMENT:
            raise EcnnFormatError(
                source, f"{info.name} section offset {offset} is not {ALIGNMENT}-aligned", where
            )
        if offset < first_free or offset + length > last_end:
            raise EcnnFormatError(
                source,
                f"{info.name} section [{offset}, {offset + length}) lies outside the file body "
                f"[{first_free}, {last_end})",
                where,
            )
        if kind not in SectionKind._value2member_map_ and info.required:
            raise EcnnUnsupportedError(
                source, f"required section of unknown kind {kind}: written by a newer edgecnn", where
            )
        sections.append(info)
    ordered = sorted(sections, key=lambda s: s.offset)
    for before, after in itertools.pairwise(ordered):
        if before.offset + before.length > after.offset:
            raise EcnnFormatError(source, f"sections {before.name} and {after.name} overlap", "section table")
    for kind in SectionKind:
        found = sum(s.kind == kind for s in sections)
        if kind in REQUIRED_ONCE and found != 1:
            raise EcnnFormatError(
                source, f"expected exactly one {kind.name} section, found {found}", "section table"
            )
        if kind in AT_MOST_ONCE and found > 1:
            raise EcnnFormatError(
                source, f"expected at most one {kind.name} section, found {found}", "section table"
            )
    return tuple(sections)


def check_protection_sections(header: Header, source: str) -> None:
    """An ENCRYPTION section exactly when the encrypted flag is set; a SIGNATURE section last,
    ending where the digest starts (so that every other byte is signed)."""
    encryption = header.find(SectionKind.ENCRYPTION)
    if header.encrypted != (encryption is not None):
        state = "is set but there is no" if header.encrypted else "is not set but there is an"
        raise EcnnFormatError(source, f"the encrypted flag {state} ENCRYPTION section", "byte 8")
    signature = header.find(SectionKind.SIGNATURE)
    if signature is not None and signature.offset + signature.length != header.file_size - DIGEST_SIZE:
        raise EcnnFormatError(
            source, "the SIGNATURE section must end where the SHA-256 digest starts", "section table"
        )


def authenticated_frame(header: bytes | memoryview | mmap.mmap, count: int) -> bytes:
    """The header and section table with every CRC field taken as zero: what an encrypted file's
    sections authenticate as associated data (the CRCs depend on the ciphertext, the rest does not)."""
    frame = bytearray(header[: table_end(count)])
    frame[HEADER_CRC_AT : HEADER_CRC_AT + 4] = bytes(4)
    for i in range(count):
        at = HEADER.size + i * SECTION_ENTRY.size + ENTRY_CRC_AT
        frame[at : at + 4] = bytes(4)
    return bytes(frame)
