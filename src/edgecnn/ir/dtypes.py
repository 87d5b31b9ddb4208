"""Element types: edgecnn names them by their numpy names ("float32", "int64", ...)."""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

SUPPORTED_DTYPES: tuple[str, ...] = (
    "float32",
    "float16",
    "float64",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "bool",
)

FLOAT_DTYPES: frozenset[str] = frozenset({"float16", "float32", "float64"})
INTEGER_DTYPES: frozenset[str] = frozenset(
    {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"}
)


def dtype_name(dtype: DTypeLike) -> str:
    """Canonical name of anything numpy understands as a dtype ("float32" for np.float32)."""
    return np.dtype(dtype).name


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES
