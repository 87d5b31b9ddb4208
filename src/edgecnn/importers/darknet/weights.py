"""Darknet ``.weights`` files: a small header, then every layer's float32 parameters in order.

Header: ``major, minor, revision`` (int32 each), then ``seen`` (images trained on): int64 when
``major*10 + minor >= 2`` and both are below 1000, else int32. Parameters follow in layer order,
little-endian float32, with no separators: per convolutional layer ``biases, [scales,
rolling_mean, rolling_variance if batch_normalize], weights``; per connected layer ``biases,
weights, [scales, rolling_mean, rolling_variance]``. Files whose major or minor exceeds 1000 store
connected weights transposed (inputs x outputs).
"""

from __future__ import annotations

import enum
import math
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from edgecnn.errors import ModelFormatError
from edgecnn.limits import MemoryBudget, read_file_bounded

FLOAT = np.dtype("<f4")


class ParamKind(enum.Enum):
    """What a block of parameters is; the random source draws each kind from a fitting law."""

    BIASES = "biases"
    SCALES = "scales"
    ROLLING_MEAN = "rolling_mean"
    ROLLING_VARIANCE = "rolling_variance"
    WEIGHTS = "weights"


@dataclass(frozen=True)
class WeightsHeader:
    major: int = 0
    minor: int = 2
    revision: int = 0
    seen: int = 0

    @property
    def seen_is_int64(self) -> bool:
        return self.major * 10 + self.minor >= 2 and self.major < 1000 and self.minor < 1000

    @property
    def transposed(self) -> bool:
        """Connected-layer weights are stored inputs x outputs."""
        return self.major > 1000 or self.minor > 1000

    @property
    def size(self) -> int:
        return 12 + (8 if self.seen_is_int64 else 4)

    def pack(self) -> bytes:
        seen = struct.pack("<q" if self.seen_is_int64 else "<i", self.seen)
        return struct.pack("<iii", self.major, self.minor, self.revision) + seen


class WeightSource(Protocol):
    """Hands out each layer's parameters in Darknet's order."""

    def take(
        self, layer: str, kind: ParamKind, shape: tuple[int, ...], *, matrix: bool = False
    ) -> np.ndarray:
        """The next ``prod(shape)`` values as a float32 array of ``shape``.

        ``matrix`` marks a connected layer's (outputs, inputs) weights, which some files transpose.
        """
        ...


class FileWeights:
    """Parameters read from a ``.weights`` file, checked against the sizes the cfg implies."""

    def __init__(self, data: bytes, source: str = "<weights>") -> None:
        self.source = source
        if len(data) < 16:
            raise ModelFormatError(f"{source}: {len(data)} bytes is too short for a Darknet weights header")
        major, minor, revision = struct.unpack_from("<iii", data, 0)
        probe = WeightsHeader(major, minor, revision)
        if probe.size > len(data):
            raise ModelFormatError(f"{source}: {len(data)} bytes is too short for a Darknet weights header")
        (seen,) = struct.unpack_from("<q" if probe.seen_is_int64 else "<i", data, 12)
        self.header = WeightsHeader(major, minor, revision, seen)
        self._data = data
        self._offset = self.header.size

    @classmethod
    def from_path(cls, path: Path, budget: MemoryBudget | None = None) -> FileWeights:
        """The file at ``path``: a regular file within ``budget`` (default :meth:`MemoryBudget.default`)."""
        return cls(read_file_bounded(path, budget or MemoryBudget.default(), "weights file"), str(path))

    @property
    def size(self) -> int:
        """Bytes of the file held in memory."""
        return len(self._data)

    def take(
        self, layer: str, kind: ParamKind, shape: tuple[int, ...], *, matrix: bool = False
    ) -> np.ndarray:
        count = math.prod(shape)
        end = self._offset + 4 * count
        if end > len(self._data):
            have = (len(self._data) - self._offset) // 4
            raise ModelFormatError(
                f"{self.source}: file too short at byte offset {self._offset}: layer {layer} needs "
                f"{count} {kind.value} values, only {have} remain (weights do not match the cfg)"
            )
        values = np.frombuffer(self._data, FLOAT, count, self._offset).astype(np.float32)
        self._offset = end
        if matrix and self.header.transposed:
            return values.reshape(shape[::-1]).T.copy()
        return values.reshape(shape)

    def finish(self) -> None:
        """Every byte must have been read: a longer file belongs to another cfg."""
        extra = len(self._data) - self._offset
        if extra:
            raise ModelFormatError(
                f"{self.source}: {extra} bytes left over at byte offset {self._offset} after the last "
                f"layer with weights (weights do not match the cfg)"
            )


class RandomWeights:
    """Seeded random parameters of the right laws (He-scaled weights, positive variances);
    remembers what it handed out so it can be written to a file."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self.blocks: list[tuple[str, ParamKind, np.ndarray]] = []

    def take(
        self, layer: str, kind: ParamKind, shape: tuple[int, ...], *, matrix: bool = False
    ) -> np.ndarray:
        rng = self._rng
        if kind is ParamKind.WEIGHTS:
            fan_in = max(1, math.prod(shape[1:]))
            values = rng.standard_normal(shape, np.float32) * np.float32(np.sqrt(2.0 / fan_in))
        elif kind in (ParamKind.SCALES, ParamKind.ROLLING_VARIANCE):
            values = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        else:
            values = rng.standard_normal(shape, np.float32) * np.float32(0.1)
        self.blocks.append((layer, kind, values))
        return values


def write_weights(
    path: str | os.PathLike[str], arrays: Iterable[np.ndarray], header: WeightsHeader | None = None
) -> None:
    """Write a ``.weights`` file: ``header`` (default version 0.2.0, seen 0) then ``arrays`` in order.

    Connected-layer matrices are written as given, so pass them transposed for a header whose
    ``transposed`` is true.
    """
    header = header or WeightsHeader()
    with open(path, "wb") as f:
        f.write(header.pack())
        for array in arrays:
            f.write(np.ascontiguousarray(array, dtype=FLOAT).tobytes())
