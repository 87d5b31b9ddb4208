"""What every storage type shares: a tensor entry as checked so far, the parts a blob is cut into,
and bounded reads of those parts from the mapped DATA section.

A blob is one or more *parts* (arrays of one element type), each starting at a multiple of
ALIGNMENT from the blob's start; the layout is computed from the entry (dtype, shape and the
storage's own keys), never read from the file, so a reader has nothing to trust but sizes it
checked itself.
"""

from __future__ import annotations

import math
import mmap
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgecnn.format.checked_json import CheckedJson
from edgecnn.format.errors import EcnnChecksumError
from edgecnn.format.layout import align

MAX_DECODED_BYTES = 2**32
"""Largest array a decoding storage may expand to (a CSR entry's dense size is not bounded by the
file's size, so without a cap a 100-byte entry could ask for exabytes)."""
FLOAT_DTYPES = ("float16", "float32", "float64")


def little_endian(dtype_name: str) -> np.dtype:
    return np.dtype(dtype_name).newbyteorder("<")


@dataclass(frozen=True)
class Part:
    """``count`` elements of ``dtype`` starting ``offset`` bytes after the blob's start."""

    offset: int
    dtype: str
    count: int

    @property
    def nbytes(self) -> int:
        return self.count * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class BlobLayout:
    parts: dict[str, Part]
    nbytes: int


def lay_out(parts: Sequence[tuple[str, str, int]]) -> BlobLayout:
    """Place (name, dtype, count) parts one after another, each at an aligned offset."""
    placed: dict[str, Part] = {}
    end = 0
    for name, dtype, count in parts:
        part = Part(align(end) if placed else 0, dtype, count)
        placed[name] = part
        end = part.offset + part.nbytes
    return BlobLayout(placed, end)


@dataclass(frozen=True)
class TensorEntry:
    """One tensor table entry after the checks common to every storage."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    crc32: int
    where: str
    storage: str = "raw"
    params: Mapping[str, Any] = field(default_factory=dict)
    layout: BlobLayout = field(default_factory=lambda: BlobLayout({}, 0))

    @property
    def count(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class DataSection:
    """The mapped file and where its DATA section lies in it; or, for a blob inside an entropy-coded
    stream, the decoded bytes (``place`` then names that stream in error messages)."""

    buffer: mmap.mmap | bytes | memoryview
    offset: int
    length: int
    place: str = "file byte"


def part_start(entry: TensorEntry, data: DataSection, name: str) -> int:
    """File offset of one part of the entry's blob."""
    return data.offset + entry.offset + entry.layout.parts[name].offset


def read_part(entry: TensorEntry, data: DataSection, name: str) -> np.ndarray:
    """A read-only 1-D view of one part (its bounds were checked with the entry's nbytes)."""
    part = entry.layout.parts[name]
    dtype = little_endian(part.dtype)
    if part.count == 0:
        return np.zeros(0, dtype)
    return np.frombuffer(data.buffer, dtype, part.count, part_start(entry, data, name))


def check_blob_crc(entry: TensorEntry, data: DataSection, check: CheckedJson) -> None:
    """The entry's CRC-32 over its whole blob (parts and the padding between them)."""
    start = data.offset + entry.offset
    with memoryview(data.buffer) as view:
        computed = zlib.crc32(view[start : start + entry.nbytes])
    if computed != entry.crc32:
        raise EcnnChecksumError(
            check.source,
            f"tensor '{entry.name}' CRC-32 mismatch: stored {entry.crc32:#010x}, computed {computed:#010x}",
            f"{entry.where}, file bytes [{start}, {start + entry.nbytes})",
        )


def part_where(entry: TensorEntry, data: DataSection, name: str, index: int | None = None) -> str:
    """'GRAPH.tensors[3] 'fc.w', indices[17], file byte 4242' for error messages."""
    part = entry.layout.parts[name]
    at = part_start(entry, data, name)
    if index is None:
        return f"{entry.where}, {name} at {data.place} {at}"
    return f"{entry.where}, {name}[{index}] at {data.place} {at + index * np.dtype(part.dtype).itemsize}"


def frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array
