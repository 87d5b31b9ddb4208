"""The interface of a storage type (how a tensor's bytes encode its values) and the writer's choice of one.

A codec knows four things: the entry keys it adds (checked on read), the blob layout those keys
imply, how to decode a blob into an array, and how to encode an array into parts.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from edgecnn.errors import GraphError
from edgecnn.format.blob import BlobLayout, DataSection, TensorEntry
from edgecnn.format.checked_json import CheckedJson

ENTROPY_CODERS = ("zlib", "lzma")
"""Entropy coders a storage can be wrapped in (format 1.2): ``<storage>+zlib``, ``<storage>+lzma``."""


@dataclass(frozen=True)
class StorageChoice:
    """How the writer should store one tensor. Text form: ``raw``, ``float16``, ``int8``,
    ``int8:axis=1`` (one scale per index of axis 1), ``csr``, ``csr:float16``, ``csr:int8``; any of
    them followed by ``+zlib`` or ``+lzma`` to entropy-code the blob (``csr:int8+zlib``)."""

    kind: str = "raw"
    values: str | None = None
    """csr only: element type of the stored non-zero values; None keeps the tensor's own dtype."""
    axis: int = 0
    """int8 only: the axis with one scale per index (the output-channel axis of a weight)."""
    entropy: str | None = None
    """The entropy coder wrapped around the blob (one of ENTROPY_CODERS), or None."""

    @property
    def inner(self) -> StorageChoice:
        """The same storage without its entropy coder."""
        return replace(self, entropy=None)

    @property
    def storage_name(self) -> str:
        """The ``storage`` name the tensor table entry gets: the coder's if there is one."""
        return self.entropy or self.kind

    @classmethod
    def parse(cls, text: str | StorageChoice) -> StorageChoice:
        if isinstance(text, StorageChoice):
            return text
        if not isinstance(text, str):
            raise GraphError(f"a storage choice is a string such as 'int8' or 'csr:float16', got {text!r}")
        base, plus, coder = text.rpartition("+")
        if plus:
            if coder not in ENTROPY_CODERS:
                raise GraphError(f"storage '{text}': unknown entropy coder '{coder}' (use zlib or lzma)")
            if not base or "+" in base:
                raise GraphError(f"storage '{text}': one storage and one entropy coder, e.g. 'csr:int8+zlib'")
            return replace(cls.parse(base), entropy=coder)
        kind, _, option = text.partition(":")
        if kind == "csr":
            return cls("csr", values=option or None)
        if kind == "int8" and option:
            match = re.fullmatch(r"axis=(\d+)", option)
            if not match:
                raise GraphError(f"storage '{text}': int8 takes ':axis=N', not ':{option}'")
            return cls("int8", axis=int(match.group(1)))
        if option:
            raise GraphError(f"storage '{text}': '{kind}' takes no option")
        return cls(kind)

    def __str__(self) -> str:
        coder = f"+{self.entropy}" if self.entropy else ""
        if self.kind == "csr" and self.values:
            return f"csr:{self.values}{coder}"
        if self.kind == "int8" and self.axis:
            return f"int8:axis={self.axis}{coder}"
        return self.kind + coder


@dataclass(frozen=True)
class EncodedBlob:
    """A tensor's storage keys for the table entry and one array per layout part (little-endian)."""

    params: dict[str, Any]
    arrays: dict[str, np.ndarray]


class StorageCodec(ABC):
    name: ClassVar[str]
    decodes: ClassVar[bool] = True
    """False only for raw, whose arrays are views of the file; the rest build a new array at load."""
    since_minor: ClassVar[int] = 1
    """The format 1.x minor version that added this storage (a file is marked with the highest)."""

    def parse_params(
        self, obj: Mapping[str, Any], dtype: str, shape: tuple[int, ...], where: str, check: CheckedJson
    ) -> dict[str, Any]:
        """The storage's own entry keys, checked; the default storage has none."""
        return {}

    @abstractmethod
    def layout(self, dtype: str, shape: tuple[int, ...], params: Mapping[str, Any]) -> BlobLayout:
        """The blob's parts for checked ``params`` (pure arithmetic, nothing read)."""

    @abstractmethod
    def read(self, entry: TensorEntry, data: DataSection, check: CheckedJson) -> np.ndarray:
        """The array the blob encodes; every value that could misdirect a read is checked first."""

    @abstractmethod
    def plan_params(self, array: np.ndarray, choice: StorageChoice, where: str) -> dict[str, Any]:
        """The entry keys ``encode`` would write (cheap: used to predict stored sizes)."""

    @abstractmethod
    def encode(self, array: np.ndarray, choice: StorageChoice, where: str) -> EncodedBlob:
        """Parts of ``array`` in this storage; GraphError (naming ``where``) if it cannot be stored so."""


def require_float(array: np.ndarray, choice: StorageChoice, where: str) -> None:
    if array.dtype.kind != "f":
        raise GraphError(
            f"cannot store {where} as '{choice}': it is {array.dtype.name}, and '{choice.kind}' "
            "holds floating-point tensors only"
        )


def require_finite(array: np.ndarray, choice: StorageChoice, where: str) -> None:
    if array.size and not np.isfinite(array).all():
        at = np.unravel_index(int(np.argmin(np.isfinite(array))), array.shape)
        raise GraphError(
            f"cannot store {where} as '{choice}': element {list(map(int, at))} is {array[at]}, "
            "and int8 scales need finite values"
        )


def to_float16(values: np.ndarray, choice: StorageChoice, where: str) -> np.ndarray:
    """float16 of ``values``; GraphError where a finite value would become infinite."""
    with np.errstate(over="ignore"):
        half = values.astype("<f2")
    overflow = np.isinf(half) & np.isfinite(values)
    if overflow.any():
        first = values.reshape(-1)[int(np.argmax(overflow.reshape(-1)))]
        raise GraphError(
            f"cannot store {where} as '{choice}': {first} overflows float16 (largest 65504); "
            "store it raw or as int8"
        )
    return half


def symmetric_int8(rows: np.ndarray, choice: StorageChoice, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-row symmetric quantisation of a 2-D array: int8 values in -127..127 and float32 scales
    with ``value ~= q * scale`` (scale = max |row| / 127; an all-zero row has scale 0)."""
    require_finite(rows, choice, where)
    amax = np.abs(rows).max(axis=1).astype(np.float32) if rows.shape[1] else np.zeros(len(rows), np.float32)
    scales = (amax / np.float32(127)).astype("<f4")
    safe = np.where(scales > 0, scales, np.float32(1))[:, None]
    q = np.rint(rows.astype(np.float32) / safe)
    return np.clip(q, -127, 127).astype(np.int8), scales
