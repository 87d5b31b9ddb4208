"""MNIST's IDX files: a big-endian header (0, 0, type code, rank, then rank uint32 sizes) and the
raw array. gzip-compressed files (.gz) are read transparently."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from edgecnn.errors import InputError, ModelFormatError
from edgecnn.train.data.dataset import Dataset

IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def parse_idx(data: bytes, source: str) -> np.ndarray:
    """Decode one IDX file's bytes; ModelFormatError says what is wrong and at which offset."""
    if len(data) < 4:
        raise ModelFormatError(f"{source}: {len(data)} bytes is too short for an IDX header (4 bytes)")
    zero, type_code, rank = struct.unpack(">HBB", data[:4])
    if zero != 0:
        raise ModelFormatError(f"{source}: not an IDX file (bytes 0-1 are {data[:2].hex()}, expected 0000)")
    if type_code not in IDX_TYPES:
        raise ModelFormatError(f"{source}: unknown IDX element type 0x{type_code:02x} at offset 2")
    if rank == 0:
        raise ModelFormatError(f"{source}: IDX rank 0 at offset 3")
    header = 4 + 4 * rank
    if len(data) < header:
        raise ModelFormatError(
            f"{source}: header of rank {rank} needs {header} bytes, the file has {len(data)}"
        )
    shape = struct.unpack(f">{rank}I", data[4:header])
    dtype = IDX_TYPES[type_code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) - header != expected:
        raise ModelFormatError(
            f"{source}: shape {list(shape)} of {dtype.name} needs {expected} data bytes after offset {header}, "
            f"the file has {len(data) - header}"
        )
    return np.frombuffer(data, dtype, offset=header).reshape(shape)


def read_idx(path: Path) -> np.ndarray:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ModelFormatError(f"{path}: damaged gzip stream: {exc}") from None
    return parse_idx(raw, str(path))


def find_idx(folder: Path, stem: str) -> Path:
    """``stem`` in ``folder``, with or without .gz, accepting the common '-idx3-ubyte' / '.idx3-ubyte' spellings."""
    for name in (stem, stem.replace("-idx", ".idx")):
        for suffix in ("", ".gz"):
            candidate = folder / f"{name}{suffix}"
            if candidate.is_file():
                return candidate
    raise InputError(f"{folder}: no {stem} (or {stem}.gz); an MNIST folder holds the four IDX files")


def images_and_labels(images: np.ndarray, labels: np.ndarray, source: str) -> Dataset:
    if images.ndim != 3:
        raise ModelFormatError(
            f"{source}: images must be a rank-3 IDX array (N, H, W), got {list(images.shape)}"
        )
    if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
        raise InputError(f"{source}: {images.shape[0]} images but labels of shape {list(labels.shape)}")
    scale = 255.0 if images.dtype == np.uint8 else 1.0
    x = (images.astype(np.float32) / scale)[:, None]
    y = labels.astype(np.int64)
    classes = tuple(str(c) for c in range(int(y.max()) + 1 if y.size else 0))
    return Dataset(x, y, classes, source)


def load_mnist(folder: Path) -> tuple[Dataset, Dataset]:
    """(train, test) from train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder of MNIST IDX files")
    parts = []
    for prefix in ("train", "t10k"):
        images = read_idx(find_idx(folder, f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(find_idx(folder, f"{prefix}-labels-idx1-ubyte"))
        parts.append(images_and_labels(images, labels, f"{folder}/{prefix}"))
    classes = max(parts[0].classes, parts[1].classes, key=len)
    train, test = (Dataset(p.images, p.labels, classes, p.name) for p in parts)
    return train, test
