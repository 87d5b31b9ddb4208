"""Storage "csr" (format 1.1): a tensor as a compressed-sparse-row matrix, decoded to a dense array at load.

The matrix is the tensor viewed as [rows = shape[0], cols = prod(shape[1:])] (a weight's output
channels are its rows). Parts: int32 ``indptr`` (rows + 1), int32 ``indices`` (nnz column indices,
strictly increasing within a row), ``values`` (nnz elements, float64/32/16 or int8), and for int8
values float32 ``scales`` (one per row: value = float32(q) * scales[row]).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from edgecnn.errors import GraphError
from edgecnn.format.blob import (
    BlobLayout,
    DataSection,
    TensorEntry,
    frozen,
    lay_out,
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
from edgecnn.format.dense_codecs import check_int8, check_scales, require_float_entry

INT32_MAX = 2**31 - 1
VALUE_TYPES = ("float64", "float32", "float16", "int8")


def matrix_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    return shape[0], math.prod(shape[1:])


class CsrCodec(StorageCodec):
    name = "csr"

    def parse_params(
        self, obj: Mapping[str, Any], dtype: str, shape: tuple[int, ...], where: str, check: CheckedJson
    ) -> dict[str, Any]:
        require_float_entry(self.name, dtype, where, check)
        if not shape:
            check.fail("storage 'csr' needs a tensor of rank 1 or more (rows are axis 0)", where)
        rows, cols = matrix_shape(shape)
        if cols > INT32_MAX:
            check.fail(f"{cols} columns do not fit the int32 column indices", f"{where}.shape")
        values = check.member(obj, "values", str, where)
        if values not in VALUE_TYPES:
            check.fail(
                f"csr values must be one of {', '.join(VALUE_TYPES)}, not '{values}'", f"{where}.values"
            )
        nnz = check.integer(
            check.member(obj, "nnz", int, where), f"{where}.nnz", 0, min(rows * cols, INT32_MAX)
        )
        return {"nnz": nnz, "values": values}

    def layout(self, dtype: str, shape: tuple[int, ...], params: Mapping[str, Any]) -> BlobLayout:
        rows, _ = matrix_shape(shape)
        nnz, values = params["nnz"], params["values"]
        parts = [("indptr", "int32", rows + 1), ("indices", "int32", nnz), ("values", values, nnz)]
        if values == "int8":
            parts.append(("scales", "float32", rows))
        return lay_out(parts)

    def read(self, entry: TensorEntry, data: DataSection, check: CheckedJson) -> np.ndarray:
        rows, cols = matrix_shape(entry.shape)
        nnz = entry.params["nnz"]
        positions = self._positions(entry, data, rows, cols, nnz, check)
        values = read_part(entry, data, "values")
        if entry.params["values"] == "int8":
            check_int8(entry, data, values, check)
            scales = read_part(entry, data, "scales")
            check_scales(entry, data, scales, check)
            row_of = positions // cols if cols else positions
            decoded = values.astype(np.float32) * scales[row_of]
        else:
            decoded = values
        dense = np.zeros(rows * cols, entry.dtype)
        dense[positions] = decoded
        return frozen(dense.reshape(entry.shape))

    @staticmethod
    def _positions(
        entry: TensorEntry, data: DataSection, rows: int, cols: int, nnz: int, check: CheckedJson
    ) -> np.ndarray:
        """Flat dense index of every stored value, after checking indptr and indices completely."""
        indptr = read_part(entry, data, "indptr").astype(np.int64)
        if indptr[0] != 0:
            check.fail(
                f"tensor '{entry.name}': indptr[0] is {indptr[0]}, not 0",
                part_where(entry, data, "indptr", 0),
            )
        if indptr[-1] != nnz:
            check.fail(
                f"tensor '{entry.name}': indptr[{rows}] is {indptr[-1]}, but nnz is {nnz}",
                part_where(entry, data, "indptr", rows),
            )
        lengths = np.diff(indptr)
        if (lengths < 0).any():
            i = int(np.argmax(lengths < 0)) + 1
            check.fail(
                f"tensor '{entry.name}': indptr decreases: indptr[{i}] = {indptr[i]} < indptr[{i - 1}] = {indptr[i - 1]}",
                part_where(entry, data, "indptr", i),
            )
        indices = read_part(entry, data, "indices").astype(np.int64)
        outside = (indices < 0) | (indices >= cols)
        if outside.any():
            j = int(np.argmax(outside))
            check.fail(
                f"tensor '{entry.name}': column index {indices[j]} is outside 0..{cols - 1}",
                part_where(entry, data, "indices", j),
            )
        positions = np.repeat(np.arange(rows, dtype=np.int64) * cols, lengths) + indices
        steps = np.diff(positions)
        if (steps <= 0).any():
            j = int(np.argmax(steps <= 0)) + 1
            row = int(np.searchsorted(indptr, j, side="right")) - 1
            check.fail(
                f"tensor '{entry.name}': column indices of row {row} are not strictly increasing "
                f"({indices[j - 1]} then {indices[j]})",
                part_where(entry, data, "indices", j),
            )
        return positions

    def plan_params(self, array: np.ndarray, choice: StorageChoice, where: str) -> dict[str, Any]:
        require_float(array, choice, where)
        values = choice.values or array.dtype.name
        if values not in VALUE_TYPES:
            raise GraphError(
                f"cannot store {where} as '{choice}': values must be one of {', '.join(VALUE_TYPES)}"
            )
        if array.ndim == 0:
            raise GraphError(f"cannot store {where} as '{choice}': a scalar has no rows")
        _, cols = matrix_shape(array.shape)
        nnz = int(np.count_nonzero(array))
        if cols > INT32_MAX or nnz > INT32_MAX:
            raise GraphError(f"cannot store {where} as '{choice}': more than 2**31 - 1 columns or non-zeros")
        return {"nnz": nnz, "values": values}

    def encode(self, array: np.ndarray, choice: StorageChoice, where: str) -> EncodedBlob:
        params = self.plan_params(array, choice, where)
        rows, cols = matrix_shape(array.shape)
        matrix = array.reshape(rows, cols)
        mask = matrix != 0  # NaN is kept (it is not zero); -0.0 is dropped and reads back as +0.0
        indptr = np.zeros(rows + 1, "<i4")
        np.cumsum(mask.sum(axis=1), out=indptr[1:])
        indices = np.nonzero(mask)[1].astype("<i4")
        arrays = {"indptr": indptr, "indices": indices}
        values = params["values"]
        if values == "int8":
            q, scales = symmetric_int8(matrix, choice, where)
            arrays["values"] = q[mask]
            arrays["scales"] = scales
        elif values == "float16":
            arrays["values"] = to_float16(matrix[mask], choice, where)
        else:
            arrays["values"] = matrix[mask].astype(np.dtype(values).newbyteorder("<"))
        return EncodedBlob(params, arrays)
