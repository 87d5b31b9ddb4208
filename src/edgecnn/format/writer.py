"""``save_ecnn``: write a Graph as one .ecnn file (header, GRAPH JSON, aligned DATA blobs, SHA-256)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from edgecnn.format.codec import StorageChoice
from edgecnn.format.graph_codec import encode_graph
from edgecnn.format.layout import (
    DIGEST_SIZE,
    SectionInfo,
    SectionKind,
    align,
    pack_frame,
    section_name,
    table_end,
)
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
    return SectionInfo(int(kind), section_name(kind), offset, length, crc32, required=True)


def _producer() -> str:
    from edgecnn import __version__

    return f"edgecnn {__version__}"


def save_ecnn(
    graph: Graph, path: str | os.PathLike[str], storage: Mapping[str, str | StorageChoice] | None = None
) -> None:
    """Write ``graph`` to ``path``; GraphError if the graph cannot be stored.

    ``storage`` chooses how named tensors are stored ("float16", "int8", "int8:axis=1", "csr",
    "csr:float16", "csr:int8", any of them + "+zlib" or "+lzma"; see docs/formats/ecnn.md); every
    other tensor is "raw". A file is marked with the lowest format version whose readers know all its
    storages: 1.0 for raw only, so older readers take it; 1.1 with float16/int8/csr; 1.2 with zlib/lzma.

    The file is written beside ``path`` and renamed over it, so a reader that has the old file
    memory-mapped keeps seeing the old bytes, and a failed save leaves no half-written file.
    """
    encoded = encode_graph(graph, _producer(), storage)
    graph_bytes = json.dumps(
        encoded.document, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    ).encode("utf-8")
    data_crc, end = 0, 0
    for tensor in encoded.tensors:  # the DATA CRC covers the padding between blobs too
        data_crc, end = chunks_crc(
            tuple((tensor.offset + at, array) for at, array in tensor.chunks), data_crc, end
        )
    graph_offset = align(table_end(2))
    data_offset = align(graph_offset + len(graph_bytes))
    digest_offset = align(data_offset + encoded.data_length)
    file_size = digest_offset + DIGEST_SIZE
    sections = [
        _section(SectionKind.GRAPH, graph_offset, len(graph_bytes), zlib.crc32(graph_bytes)),
        _section(SectionKind.DATA, data_offset, encoded.data_length, data_crc),
    ]
    target = Path(path)
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            out = _HashingWriter(file)
            minor = required_minor(encoded.tensors)
            out.write(pack_frame(0, file_size, sections, minor))
            out.pad_to(graph_offset)
            out.write(graph_bytes)
            out.pad_to(data_offset)
            for tensor in encoded.tensors:
                for at, array in tensor.chunks:
                    out.pad_to(data_offset + tensor.offset + at)
                    out.write(as_blob(array))
            out.pad_to(digest_offset)
            file.write(out.sha256.digest())
        os.chmod(temp_name, target.stat().st_mode & 0o7777 if target.exists() else 0o644)
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
