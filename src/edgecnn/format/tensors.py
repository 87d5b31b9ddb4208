"""The tensor table: where each array's bytes lie in the DATA section and how they are stored.

Storage "raw" is a C-order little-endian blob mapped straight from the file (zero copy, read-only).
Later storages (CSR sparse, int8 with scales, float16) register a reader in ``STORAGE_READERS``; a
file using a storage this reader lacks is refused by name rather than misread.
"""

from __future__ import annotations

import math
import mmap
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgecnn.errors import GraphError
from edgecnn.format.checked_json import CheckedJson
from edgecnn.format.errors import EcnnChecksumError, EcnnUnsupportedError
from edgecnn.format.layout import ALIGNMENT, align
from edgecnn.ir.dtypes import SUPPORTED_DTYPES

MAX_RANK = 32
"""numpy's smallest supported maximum number of dimensions."""
MAX_DIM = 2**62


def little_endian(dtype_name: str) -> np.dtype:
    return np.dtype(dtype_name).newbyteorder("<")


# ------------------------------------------------------------------ write
@dataclass(frozen=True)
class PlannedTensor:
    """An array placed in the DATA section: ``offset`` is relative to the section start."""

    name: str
    array: np.ndarray  # C-contiguous, little-endian
    offset: int
    crc32: int

    @property
    def nbytes(self) -> int:
        return self.array.nbytes

    def entry(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.array.dtype.name,
            "shape": list(self.array.shape),
            "storage": "raw",
            "offset": self.offset,
            "nbytes": self.nbytes,
            "crc32": self.crc32,
        }


def as_blob(array: np.ndarray) -> memoryview:
    """The array's bytes without a copy (it must be C-contiguous)."""
    return memoryview(array.reshape(-1).view(np.uint8))


def plan_tensor(name: str, value: Any, offset: int, where: str) -> PlannedTensor:
    """Lay ``value`` out at the first aligned offset at or after ``offset``."""
    array = np.asarray(value)
    if array.dtype.name not in SUPPORTED_DTYPES:
        raise GraphError(f"cannot save {where} '{name}': dtype {array.dtype} is not one edgecnn stores")
    array = np.asarray(array, dtype=little_endian(array.dtype.name), order="C")  # keeps 0-d arrays 0-d
    return PlannedTensor(name, array, align(offset), zlib.crc32(as_blob(array)))


# ------------------------------------------------------------------- read
@dataclass(frozen=True)
class DataSection:
    """The mapped file and where its DATA section lies in it."""

    buffer: mmap.mmap
    offset: int
    length: int


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    crc32: int
    where: str


StorageReader = Callable[[TensorEntry, DataSection, bool, CheckedJson], np.ndarray]


def read_raw(entry: TensorEntry, data: DataSection, verify: bool, check: CheckedJson) -> np.ndarray:
    """Map a raw blob as a read-only array (no bytes are read unless ``verify``)."""
    start = data.offset + entry.offset
    if verify:
        with memoryview(data.buffer) as view:
            computed = zlib.crc32(view[start : start + entry.nbytes])
        if computed != entry.crc32:
            raise EcnnChecksumError(
                check.source,
                f"tensor '{entry.name}' CRC-32 mismatch: stored {entry.crc32:#010x}, computed {computed:#010x}",
                f"{entry.where}, file bytes [{start}, {start + entry.nbytes})",
            )
    dtype = little_endian(entry.dtype)
    count = math.prod(entry.shape)
    if count == 0:
        array = np.zeros(entry.shape, dtype)
        array.flags.writeable = False
        return array
    if entry.dtype == "bool":
        raw = np.frombuffer(data.buffer, np.uint8, count, start)
        if raw.max() > 1:
            check.fail(f"bool tensor '{entry.name}' holds bytes other than 0 and 1", entry.where)
    return np.frombuffer(data.buffer, dtype, count, start).reshape(entry.shape)


STORAGE_READERS: dict[str, StorageReader] = {"raw": read_raw}


def parse_entry(value: Any, where: str, data_length: int, check: CheckedJson) -> tuple[TensorEntry, str]:
    """Check one tensor table entry against the DATA section; returns it and its storage name."""
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
    expected = math.prod(shape) * np.dtype(dtype).itemsize
    if nbytes != expected:
        check.fail(
            f"nbytes {nbytes} does not match {dtype}{list(shape)} ({expected} bytes)", f"{where}.nbytes"
        )
    if offset + nbytes > data_length:
        check.fail(
            f"bytes [{offset}, {offset + nbytes}) run past the end of the DATA section ({data_length} bytes)",
            where,
        )
    return TensorEntry(name, dtype, shape, offset, nbytes, crc, where), storage


def read_tensor_table(
    value: Any, data: DataSection, verify: bool, check: CheckedJson
) -> dict[str, np.ndarray]:
    """Every tensor of the table by name, mapped from the file."""
    entries = check.expect(value, list, "GRAPH.tensors")
    tensors: dict[str, np.ndarray] = {}
    for i, item in enumerate(entries):
        entry, storage = parse_entry(item, f"GRAPH.tensors[{i}]", data.length, check)
        if entry.name in tensors:
            check.fail(f"tensor name '{entry.name}' appears twice", entry.where)
        tensors[entry.name] = STORAGE_READERS[storage](entry, data, verify, check)
    return tensors
