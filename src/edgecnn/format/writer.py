"""``save_ecnn``: write a Graph as one .ecnn file (header, GRAPH JSON, aligned DATA blobs, SHA-256),
encrypted and signed on request (format 1.3)."""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

from edgecnn.atomic import atomic_write
from edgecnn.errors import ModelFormatError
from edgecnn.format import signature
from edgecnn.format.codec import StorageChoice
from edgecnn.format.graph_codec import EncodedGraph, encode_graph
from edgecnn.format.keys import KeyLike, key_source, signing_key
from edgecnn.format.layout import (
    DIGEST_SIZE,
    FLAG_ENCRYPTED,
    PROTECTED_MINOR,
    SectionInfo,
    SectionKind,
    align,
    authenticated_frame,
    pack_frame,
    section_name,
    table_end,
)
from edgecnn.format.sealing import Sealer, sealed_length
from edgecnn.format.tensors import as_blob, chunks_crc, required_minor
from edgecnn.ir.graph import Graph

_ZEROS = bytes(64)


class _HashingWriter:
    """Writes to a file while feeding the SHA-256 of everything written."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.sha256 = hashlib.sha256()
        self.position = 0

    def write(self, data: bytes | memoryview) -> None:
        self.file.write(data)
        self.sha256.update(data)
        self.position += len(data)

    def pad_to(self, offset: int) -> None:
        """Zero bytes up to ``offset`` (layouts only ever move forward)."""
        gap = offset - self.position
        self.write(_ZEROS[:gap] if gap <= len(_ZEROS) else bytes(gap))


def _section(kind: SectionKind, offset: int, length: int, crc32: int) -> SectionInfo:
    return SectionInfo(
        int(kind), section_name(kind), offset, length, crc32, required=kind != SectionKind.SIGNATURE
    )


def _producer() -> str:
    from edgecnn import __version__

    return f"edgecnn {__version__}"


def _data_pieces(encoded: EncodedGraph) -> Iterator[bytes | memoryview]:
    """The DATA section's bytes in order: each blob's parts and the zero padding before them."""
    position = 0
    for tensor in encoded.tensors:
        for at, array in tensor.chunks:
            start = tensor.offset + at
            if start > position:
                yield bytes(start - position)
            blob = as_blob(array)
            yield blob
            position = start + len(blob)
    if encoded.data_length > position:
        yield bytes(encoded.data_length - position)


@dataclass
class _Body:
    """One section as it will be written: its kind, stored length, CRC-32 and bytes (in pieces)."""

    kind: SectionKind
    length: int
    crc32: int
    pieces: Iterable[bytes | memoryview]


def _plain_bodies(encoded: EncodedGraph, graph_bytes: bytes) -> list[_Body]:
    data_crc, end = 0, 0
    for tensor in encoded.tensors:  # the DATA CRC covers the padding between blobs too
        data_crc, end = chunks_crc(
            tuple((tensor.offset + at, array) for at, array in tensor.chunks), data_crc, end
        )
    return [
        _Body(SectionKind.GRAPH, len(graph_bytes), zlib.crc32(graph_bytes), [graph_bytes]),
        _Body(SectionKind.DATA, encoded.data_length, data_crc, _data_pieces(encoded)),
    ]


def _layout(bodies: list[_Body]) -> tuple[list[SectionInfo], int]:
    """Section entries at aligned offsets and the file size. A SIGNATURE section (always the last
    body) is placed so that it ends where the digest starts."""
    count = len(bodies)
    offset = align(table_end(count))
    sections = []
    for body in bodies:
        sections.append(_section(body.kind, offset, body.length, body.crc32))
        offset = align(offset + body.length)
    if bodies and bodies[-1].kind == SectionKind.SIGNATURE:
        return sections, sections[-1].offset + signature.SECTION_BYTES + DIGEST_SIZE
    return sections, offset + DIGEST_SIZE


def _seal(bodies: list[_Body], sealer: Sealer, minor: int) -> tuple[list[_Body], list[SectionInfo], int]:
    """The GRAPH and DATA bodies encrypted. The associated data is the final table, whose lengths
    do not depend on the ciphertext: it is laid out first with the CRCs still zero (they are not
    authenticated), then laid out again with the ciphertext's CRCs."""
    sized = [
        _Body(b.kind, sealed_length(b.length, sealer.chunk), 0, ())
        if b.kind in (SectionKind.GRAPH, SectionKind.DATA)
        else b
        for b in bodies
    ]
    sections, file_size = _layout(sized)
    frame = authenticated_frame(pack_frame(FLAG_ENCRYPTED, file_size, sections, minor), len(sections))
    sealed = []
    for plain, body in zip(bodies, sized, strict=True):
        if body is plain:
            sealed.append(plain)
            continue
        stored = list(sealer.seal(int(plain.kind), plain.pieces, frame))
        crc = 0
        for piece in stored:
            crc = zlib.crc32(piece, crc)
        sealed.append(_Body(plain.kind, body.length, crc, stored))
    sections, sealed_size = _layout(sealed)
    assert sealed_size == file_size, "sealed sections differ from their computed lengths"
    return sealed, sections, file_size


def save_ecnn(
    graph: Graph,
    path: str | os.PathLike[str],
    storage: Mapping[str, str | StorageChoice] | None = None,
    *,
    encrypt: KeyLike | None = None,
    sign: Any = None,
) -> None:
    """Write ``graph`` to ``path``; GraphError if the graph cannot be stored.

    ``storage`` chooses how named tensors are stored ("float16", "int8", "int8:axis=1", "csr",
    "csr:float16", "csr:int8", any of them + "+zlib" or "+lzma"; see docs/formats/ecnn.md); every
    other tensor is "raw". A file is marked with the lowest format version whose readers know all its
    features: 1.0 for raw only, so older readers take it; 1.1 with float16/int8/csr; 1.2 with
    zlib/lzma; 1.3 when encrypted or signed.

    ``encrypt`` (a model key: bytes, a key file, a callback or a KeySource) encrypts the graph and
    the weights with AES-256-GCM; ``sign`` (an Ed25519 private key or its PEM file) signs the file.
    Both need the ``crypto`` extra. The file is written beside ``path`` and renamed over it
    (edgecnn.atomic): a reader that has the old file mapped keeps the old bytes, a failed save
    leaves the old file, and a write error is a ModelFormatError naming ``path``.
    """
    encoded = encode_graph(graph, _producer(), storage)
    graph_bytes = json.dumps(
        encoded.document, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    ).encode("utf-8")
    signer = signing_key(sign) if sign is not None else None
    minor = required_minor(encoded.tensors)
    if encrypt is not None or signer is not None:
        minor = max(minor, PROTECTED_MINOR)
    bodies = _plain_bodies(encoded, graph_bytes)
    sealer = Sealer(key_source(encrypt).key()) if encrypt is not None else None
    if sealer is not None:
        record = sealer.record()
        bodies.append(_Body(SectionKind.ENCRYPTION, len(record), zlib.crc32(record), [record]))
    if signer is not None:
        record = signature.unsigned_record(signer)
        bodies.append(_Body(SectionKind.SIGNATURE, len(record), zlib.crc32(record), [record]))
    flags = FLAG_ENCRYPTED if sealer is not None else 0
    if sealer is not None:
        bodies, sections, file_size = _seal(bodies, sealer, minor)
    else:
        sections, file_size = _layout(bodies)

    def write(file: BinaryIO) -> None:
        out = _HashingWriter(file)
        out.write(pack_frame(flags, file_size, sections, minor))
        for section, body in zip(sections, bodies, strict=True):
            out.pad_to(section.offset)
            if section.kind == SectionKind.SIGNATURE:
                out.write(signature.unsigned_record(signer)[: signature.PUBLIC_KEY_BYTES])
                out.write(signature.sign(signer, out.sha256.copy().digest()))
                continue
            for piece in body.pieces:
                out.write(piece)
        out.pad_to(file_size - DIGEST_SIZE)
        file.write(out.sha256.digest())

    atomic_write(path, write, error=ModelFormatError, what="model file")
