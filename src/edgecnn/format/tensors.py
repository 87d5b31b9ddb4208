"""The tensor table: where each array's bytes lie in the DATA section and how they are stored.

Storage "raw" is a C-order little-endian blob mapped straight from the file (zero copy, read-only).
Format 1.1 adds "float16", "int8" (per-axis scales) and "csr" (sparse rows), each decoded to a new
array at load (dense_codecs.py, csr_codec.py); format 1.2 adds "zlib" and "lzma", which entropy-code
any of those (entropy_codec.py). Every storage is a codec in ``STORAGE_READERS``; a file
using a storage this reader lacks is refused by name rather than misread.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgecnn.errors import GraphError
from edgecnn.format.blob import (
    MAX_DECODED_BYTES,
    DataSection,
    TensorEntry,
    check_blob_crc,
    little_endian,
)
from edgecnn.format.checked_json import CheckedJson
from edgecnn.format.codec import StorageChoice, StorageCodec
from edgecnn.format.csr_codec import CsrCodec
from edgecnn.format.dense_codecs import Float16Codec, Int8Codec, RawCodec
from edgecnn.format.entropy_codec import LzmaCodec, ZlibCodec
from edgecnn.format.errors import EcnnUnsupportedError
from edgecnn.format.layout import ALIGNMENT, align
from edgecnn.ir.dtypes import SUPPORTED_DTYPES
from edgecnn.limits import Tally

__all__ = ["DataSection", "TensorEntry", "little_endian"]

MAX_RANK = 32
"""numpy's smallest supported maximum number of dimensions."""
MAX_DIM = 2**62

_BASE_CODECS: dict[str, StorageCodec] = {
    codec.name: codec for codec in (RawCodec(), Float16Codec(), Int8Codec(), CsrCodec())
}
STORAGE_READERS: dict[str, StorageCodec] = {
    **_BASE_CODECS,
    **{codec.name: codec for codec in (ZlibCodec(_BASE_CODECS), LzmaCodec(_BASE_CODECS))},
}
"""Every storage this edgecnn reads and writes, by the name files use (the entropy coders wrap the others)."""


# ------------------------------------------------------------------ write
@dataclass(frozen=True)
class PlannedTensor:
    """An array placed in the DATA section: ``offset`` is relative to the section start."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    storage: str
    params: dict[str, Any]
    chunks: tuple[tuple[int, np.ndarray], ...]  # (offset inside the blob, little-endian C-order array)
    offset: int
    nbytes: int
    crc32: int

    def entry(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "storage": self.storage,
            **self.params,
            "offset": self.offset,
            "nbytes": self.nbytes,
            "crc32": self.crc32,
        }


def as_blob(array: np.ndarray) -> memoryview:
    """The array's bytes without a copy (it must be C-contiguous)."""
    return array.reshape(-1).view(np.uint8).data


def chunks_crc(chunks: tuple[tuple[int, np.ndarray], ...], crc: int = 0, start: int = 0) -> tuple[int, int]:
    """CRC-32 of the chunks laid out from ``start`` with zero bytes between them; returns (crc, end)."""
    end = start
    for at, array in chunks:
        crc = zlib.crc32(as_blob(array), zlib.crc32(bytes(at - end), crc))
        end = at + array.nbytes
    return crc, end


def plan_tensor(
    name: str, value: Any, offset: int, where: str, storage: str | StorageChoice = "raw"
) -> PlannedTensor:
    """Encode ``value`` in ``storage`` and lay it out at the first aligned offset at or after ``offset``."""
    array = np.asarray(value)
    if array.dtype.name not in SUPPORTED_DTYPES:
        raise GraphError(f"cannot save {where} '{name}': dtype {array.dtype} is not one edgecnn stores")
    array = np.asarray(array, dtype=little_endian(array.dtype.name), order="C")  # keeps 0-d arrays 0-d
    choice = StorageChoice.parse(storage)
    codec = codec_for(choice, f"{where} '{name}'")
    encoded = codec.encode(array, choice, f"{where} '{name}'")
    layout = codec.layout(array.dtype.name, array.shape, encoded.params)
    chunks = tuple(
        (part.offset, _checked_part(encoded.arrays[part_name], part.dtype, part.count))
        for part_name, part in layout.parts.items()
    )
    crc, end = chunks_crc(chunks)
    assert end == layout.nbytes, f"{choice.kind} layout of '{name}' ends at {end}, expected {layout.nbytes}"
    return PlannedTensor(
        name, array.dtype.name, array.shape, codec.name, encoded.params, chunks, align(offset), end, crc
    )


def codec_for(choice: StorageChoice, where: str) -> StorageCodec:
    """The codec that writes ``choice``: its entropy coder's if it has one (which wraps the rest)."""
    codec = STORAGE_READERS.get(choice.kind) if choice.kind in _BASE_CODECS else None
    if codec is None:
        raise GraphError(
            f"cannot save {where}: unknown storage '{choice.kind}' (one of {', '.join(_BASE_CODECS)}, "
            "optionally followed by +zlib or +lzma)"
        )
    return STORAGE_READERS[choice.entropy] if choice.entropy else codec


def _checked_part(array: np.ndarray, dtype: str, count: int) -> np.ndarray:
    flat = np.ascontiguousarray(array, dtype=little_endian(dtype)).reshape(-1)
    assert flat.size == count, f"a {dtype} part of {flat.size} elements where the layout has {count}"
    return flat


def stored_nbytes(array: np.ndarray, storage: str | StorageChoice) -> int:
    """Size of ``array``'s blob in ``storage`` without encoding it (for choosing a storage)."""
    choice = StorageChoice.parse(storage)
    codec = codec_for(choice, "tensor")
    params = codec.plan_params(np.asarray(array), choice, "tensor")
    return codec.layout(np.asarray(array).dtype.name, np.shape(array), params).nbytes


def uses_new_storages(tensors: list[PlannedTensor]) -> bool:
    """True when a format-1.0 reader could not read these tensors."""
    return required_minor(tensors) > 0


def required_minor(tensors: list[PlannedTensor]) -> int:
    """The lowest format 1.x minor version whose readers know every storage these tensors use: 0 for
    raw only, 1 with float16/int8/csr, 2 with an entropy coder."""
    return max((STORAGE_READERS[t.storage].since_minor for t in tensors), default=0)


def parse_storage_plan(plan: Mapping[str, str | StorageChoice] | None) -> dict[str, StorageChoice]:
    return {name: StorageChoice.parse(choice) for name, choice in (plan or {}).items()}


# ------------------------------------------------------------------- read
def parse_entry(value: Any, where: str, data_length: int, check: CheckedJson) -> TensorEntry:
    """Check one tensor table entry, its storage's keys and its blob's size against the DATA section."""
    obj = check.expect(value, dict, where)
    name = check.member(obj, "name", str, where)
    where = f"{where} '{name}'"
    dtype = check.member(obj, "dtype", str, where)
    if dtype not in SUPPORTED_DTYPES:
        check.fail(f"unknown dtype '{dtype}'", f"{where}.dtype")
    dims = check.member(obj, "shape", list, where)
    if len(dims) > MAX_RANK:
        check.fail(f"rank {len(dims)} exceeds {MAX_RANK}", f"{where}.shape")
    shape = tuple(check.integer(d, f"{where}.shape[{i}]", 0, MAX_DIM) for i, d in enumerate(dims))
    storage = check.member(obj, "storage", str, where)
    if storage not in STORAGE_READERS:
        raise EcnnUnsupportedError(
            check.source,
            f"tensor '{name}' uses storage '{storage}', which this edgecnn cannot read "
            f"(it reads: {', '.join(sorted(STORAGE_READERS))}); upgrade edgecnn",
            f"{where}.storage",
        )
    offset = check.integer(check.member(obj, "offset", int, where), f"{where}.offset", 0, data_length)
    nbytes = check.integer(check.member(obj, "nbytes", int, where), f"{where}.nbytes", 0, data_length)
    crc = check.integer(check.member(obj, "crc32", int, where), f"{where}.crc32", 0, 2**32 - 1)
    if offset % ALIGNMENT:
        check.fail(f"offset {offset} is not {ALIGNMENT}-aligned", f"{where}.offset")
    codec = STORAGE_READERS[storage]
    params = codec.parse_params(obj, dtype, shape, where, check)
    layout = codec.layout(dtype, shape, params)
    if nbytes != layout.nbytes:
        stored_as = "" if storage == "raw" else f" stored as '{storage}'"
        check.fail(
            f"nbytes {nbytes} does not match {dtype}{list(shape)}{stored_as} ({layout.nbytes} bytes)",
            f"{where}.nbytes",
        )
    if offset + nbytes > data_length:
        check.fail(
            f"bytes [{offset}, {offset + nbytes}) run past the end of the DATA section ({data_length} bytes)",
            where,
        )
    decoded = math.prod(shape) * np.dtype(dtype).itemsize
    if codec.decodes and decoded > MAX_DECODED_BYTES:
        raise EcnnUnsupportedError(
            check.source,
            f"tensor '{name}' decodes to {decoded} bytes, more than this reader's limit of "
            f"{MAX_DECODED_BYTES} for a '{storage}' tensor",
            where,
        )
    return TensorEntry(name, dtype, shape, offset, nbytes, crc, where, storage, params, layout)


def read_tensor_table(
    value: Any, data: DataSection, verify: bool, check: CheckedJson, tally: Tally
) -> dict[str, np.ndarray]:
    """Every tensor of the table by name: raw ones mapped from the file, the others decoded.

    Every entry is checked and the memory of every decoded tensor added to ``tally`` before the
    first is decoded, so a small file that declares gigabytes is refused without decoding any."""
    items = check.expect(value, list, "GRAPH.tensors")
    entries: dict[str, TensorEntry] = {}
    for i, item in enumerate(items):
        entry = parse_entry(item, f"GRAPH.tensors[{i}]", data.length, check)
        if entry.name in entries:
            check.fail(f"tensor name '{entry.name}' appears twice", entry.where)
        if STORAGE_READERS[entry.storage].decodes:
            tally.add(
                entry.count * np.dtype(entry.dtype).itemsize, f"tensor '{entry.name}' (GRAPH.tensors[{i}])"
            )
        entries[entry.name] = entry
    tensors: dict[str, np.ndarray] = {}
    for entry in entries.values():
        if verify:
            check_blob_crc(entry, data, check)
        tensors[entry.name] = STORAGE_READERS[entry.storage].read(entry, data, check)
    return tensors
