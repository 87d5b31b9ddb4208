"""Dense storages: "raw" (format 1.0, zero copy), "float16" and "int8" (format 1.1, decoded at load)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from edgecnn.errors import GraphError
from edgecnn.format.blob import (
    FLOAT_DTYPES,
    BlobLayout,
    DataSection,
    TensorEntry,
    frozen,
    lay_out,
    little_endian,
    part_start,
    part_where,
    read_part,
)
from edgecnn.format.checked_json import CheckedJson
from edgecnn.format.codec import (
    EncodedBlob,
    StorageChoice,
    StorageCodec,
    require_float,
    symmetric_int8,
    to_float16,
)


def require_float_entry(storage: str, dtype: str, where: str, check: CheckedJson) -> None:
    if dtype not in FLOAT_DTYPES:
        check.fail(f"storage '{storage}' holds floating-point tensors, not {dtype}", f"{where}.dtype")


def check_scales(entry: TensorEntry, data: DataSection, scales: np.ndarray, check: CheckedJson) -> None:
    """Scales must be finite and non-negative (a negative or NaN scale would be a silent corruption)."""
    bad = ~(np.isfinite(scales) & (scales >= 0))
    if bad.any():
        i = int(np.argmax(bad))
        check.fail(
            f"tensor '{entry.name}': scale {scales[i]} is not a finite non-negative number",
            part_where(entry, data, "scales", i),
        )


def check_int8(entry: TensorEntry, data: DataSection, values: np.ndarray, check: CheckedJson) -> None:
    """Symmetric int8 uses -127..127; -128 marks a file not written by a symmetric quantiser."""
    if values.size and values.min() < -127:
        i = int(np.argmin(values))
        check.fail(
            f"tensor '{entry.name}': int8 value -128 is outside the symmetric range -127..127",
            part_where(entry, data, "values", i),
        )


class RawCodec(StorageCodec):
    """C-order little-endian elements, mapped straight from the file (read-only, no copy)."""

    name = "raw"
    decodes = False
    since_minor = 0

    def layout(self, dtype: str, shape: tuple[int, ...], params: Mapping[str, Any]) -> BlobLayout:
        return lay_out([("data", dtype, int(np.prod(shape, dtype=object)))])

    def read(self, entry: TensorEntry, data: DataSection, check: CheckedJson) -> np.ndarray:
        if entry.count == 0:
            return frozen(np.zeros(entry.shape, little_endian(entry.dtype)))
        if entry.dtype == "bool":
            raw = np.frombuffer(data.buffer, np.uint8, entry.count, part_start(entry, data, "data"))
            if raw.max() > 1:
                check.fail(f"bool tensor '{entry.name}' holds bytes other than 0 and 1", entry.where)
        return read_part(entry, data, "data").reshape(entry.shape)

    def plan_params(self, array: np.ndarray, choice: StorageChoice, where: str) -> dict[str, Any]:
        return {}

    def encode(self, array: np.ndarray, choice: StorageChoice, where: str) -> EncodedBlob:
        return EncodedBlob({}, {"data": array})


class Float16Codec(StorageCodec):
    """IEEE half-precision elements in C order; decoded to the entry's dtype."""

    name = "float16"

    def parse_params(
        self, obj: Mapping[str, Any], dtype: str, shape: tuple[int, ...], where: str, check: CheckedJson
    ) -> dict[str, Any]:
        require_float_entry(self.name, dtype, where, check)
        return {}

    def layout(self, dtype: str, shape: tuple[int, ...], params: Mapping[str, Any]) -> BlobLayout:
        return lay_out([("values", "float16", int(np.prod(shape, dtype=object)))])

    def read(self, entry: TensorEntry, data: DataSection, check: CheckedJson) -> np.ndarray:
        values = read_part(entry, data, "values")
        return frozen(values.astype(entry.dtype).reshape(entry.shape))

    def plan_params(self, array: np.ndarray, choice: StorageChoice, where: str) -> dict[str, Any]:
        require_float(array, choice, where)
        return {}

    def encode(self, array: np.ndarray, choice: StorageChoice, where: str) -> EncodedBlob:
        require_float(array, choice, where)
        return EncodedBlob({}, {"values": to_float16(array.reshape(-1), choice, where)})


class Int8Codec(StorageCodec):
    """Symmetric int8 with one float32 scale per index of ``axis``: value = float32(q) * scale."""

    name = "int8"

    def parse_params(
        self, obj: Mapping[str, Any], dtype: str, shape: tuple[int, ...], where: str, check: CheckedJson
    ) -> dict[str, Any]:
        require_float_entry(self.name, dtype, where, check)
        if not shape:
            check.fail("storage 'int8' needs a tensor of rank 1 or more (scales run along an axis)", where)
        axis = check.integer(check.member(obj, "axis", int, where), f"{where}.axis", 0, len(shape) - 1)
        return {"axis": axis}

    def layout(self, dtype: str, shape: tuple[int, ...], params: Mapping[str, Any]) -> BlobLayout:
        count = int(np.prod(shape, dtype=object))
        return lay_out([("scales", "float32", shape[params["axis"]]), ("values", "int8", count)])

    def read(self, entry: TensorEntry, data: DataSection, check: CheckedJson) -> np.ndarray:
        axis = entry.params["axis"]
        scales = read_part(entry, data, "scales")
        check_scales(entry, data, scales, check)
        values = read_part(entry, data, "values")
        check_int8(entry, data, values, check)
        broadcast = [1] * len(entry.shape)
        broadcast[axis] = entry.shape[axis]
        decoded = values.reshape(entry.shape).astype(np.float32) * scales.reshape(broadcast)
        return frozen(decoded.astype(entry.dtype, copy=False))

    def plan_params(self, array: np.ndarray, choice: StorageChoice, where: str) -> dict[str, Any]:
        require_float(array, choice, where)
        if array.ndim == 0 or not 0 <= choice.axis < array.ndim:
            raise GraphError(
                f"cannot store {where} as '{choice}': shape {list(array.shape)} has no axis {choice.axis}"
            )
        return {"axis": choice.axis}

    def encode(self, array: np.ndarray, choice: StorageChoice, where: str) -> EncodedBlob:
        params = self.plan_params(array, choice, where)
        moved = np.moveaxis(array, choice.axis, 0)
        q, scales = symmetric_int8(
            moved.reshape(moved.shape[0], int(np.prod(moved.shape[1:]))), choice, where
        )
        values = np.moveaxis(q.reshape(moved.shape), 0, choice.axis)
        return EncodedBlob(params, {"scales": scales, "values": np.ascontiguousarray(values)})
