"""What a batch job reads: its inputs listed as numbered items, each with the identity its output row keeps.

An input argument is a folder of images (recursive, sorted), a text file of paths (``.txt``/``.lst``,
one per line, relative to the file's folder), a glob pattern, an image, a ``.npy`` array, a ``.npz``
archive, or a Parquet/CSV table whose ``column`` holds image paths or arrays. Arrays hold one
sample per row along their first axis (``.npz``: each member in turn). Listing only names the
items; reading them happens in the workers (``read_array``), so a bad item fails alone.
"""

from __future__ import annotations

import glob
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.errors import EdgeCNNError, InputError
from edgecnn.vision.sources import IMAGE_SUFFIXES

LIST_SUFFIXES = frozenset({".txt", ".lst"})
TABLE_SUFFIXES = frozenset({".parquet", ".csv"})
ARRAY_SUFFIXES = frozenset({".npy", ".npz"})
PATH_COLUMNS = ("path", "image", "file", "filename")
"""Table columns taken as image paths when ``column`` is not given, in this order."""
BATCH_EXTRA = "pip install 'edgecnn[batch]'"


@dataclass(frozen=True)
class Item:
    """One input: ``index`` is its place in the job (the key every output row carries), ``path``
    the file (``archive.npz[member]`` for a member), ``row`` its row in an array or table (None for
    an image file), ``kind`` how to read it: "image", "array" (row of a .npy/.npz member) or
    "table" (row of a table's array column)."""

    index: int
    path: str
    row: int | None
    kind: str
    column: str = ""  # the table column, for kind "table"


def import_pyarrow() -> Any:
    """pyarrow, or an error naming the extra that installs it."""
    try:
        import pyarrow
    except ImportError:
        raise EdgeCNNError(f"Parquet output and table inputs need pyarrow: {BATCH_EXTRA}") from None
    return pyarrow


def list_items(inputs: Sequence[str | Path], column: str | None = None) -> list[Item]:
    """Every item the ``inputs`` name, numbered in order; an input that names nothing is an error."""
    items: list[Item] = []
    for source in inputs:
        found = list(_expand(str(source), column))
        if not found:
            raise InputError(f"batch input {source} names no images, arrays or table rows")
        first = len(items)
        items.extend(Item(first + i, path, row, kind, col) for i, (path, row, kind, col) in enumerate(found))
    return items


def listing_digest(items: Sequence[Item]) -> str:
    """SHA-256 of the item list: a resumed job must list exactly the same items."""
    digest = hashlib.sha256()
    for item in items:
        digest.update(f"{item.index}\t{item.path}\t{item.row}\t{item.kind}\t{item.column}\n".encode())
    return digest.hexdigest()


Found = tuple[str, "int | None", str, str]


def _expand(source: str, column: str | None) -> Iterator[Found]:
    path = Path(source)
    if path.is_dir():
        for file in sorted(path.rglob("*")):
            if file.is_file() and file.suffix.lower() in IMAGE_SUFFIXES:
                yield str(file), None, "image", ""
        return
    if not path.exists() and glob.has_magic(source):
        for name in sorted(glob.glob(source, recursive=True)):
            if Path(name).is_file():
                yield from _expand(name, column)
        return
    if not path.is_file():
        raise InputError(f"batch input not found: {source}")
    suffix = path.suffix.lower()
    if suffix in LIST_SUFFIXES:
        yield from _list_file(path)
    elif suffix == ".npy":
        yield from ((source, row, "array", "") for row in range(_npy_rows(path)))
    elif suffix == ".npz":
        for member, rows in _npz_rows(path):
            yield from ((f"{source}[{member}]", row, "array", "") for row in range(rows))
    elif suffix in TABLE_SUFFIXES:
        yield from _table_rows(path, column)
    else:
        yield source, None, "image", ""  # decoded (or reported as unreadable) by the worker


def _list_file(path: Path) -> Iterator[Found]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the list of inputs {path}: {exc}") from None
    for line in lines:
        name = line.strip()
        if name and not name.startswith("#"):
            yield str(path.parent / name), None, "image", ""


def _npy_rows(path: Path) -> int:
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a plain .npy array ({exc})") from None
    if array.ndim < 1:
        raise InputError(f"{path}: a 0-d array holds no samples; save one sample per row")
    return int(array.shape[0])


def _npz_rows(path: Path) -> list[tuple[str, int]]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            members = [(name, archive[name].shape) for name in archive.files]
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a plain .npz archive ({exc})") from None
    for name, shape in members:
        if not shape:
            raise InputError(f"{path}[{name}]: a 0-d array holds no samples; save one sample per row")
    return [(name, int(shape[0])) for name, shape in members]


def read_table(path: Path) -> Any:
    """A Parquet or CSV file as a pyarrow Table."""
    import_pyarrow()
    import pyarrow as pa
    import pyarrow.csv
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path) if path.suffix.lower() == ".parquet" else pyarrow.csv.read_csv(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"cannot read the table {path}: {exc}") from None


def _table_rows(path: Path, column: str | None) -> Iterator[Found]:
    import pyarrow as pa

    table = read_table(path)
    if column is None:
        column = next((c for c in PATH_COLUMNS if c in table.column_names), None)
        if column is None:
            raise InputError(
                f"{path}: no column named {', '.join(PATH_COLUMNS)}; name the path or array column "
                f"with --column (columns: {', '.join(table.column_names)})"
            )
    if column not in table.column_names:
        raise InputError(f"{path}: no column {column!r} (columns: {', '.join(table.column_names)})")
    values = table.column(column)
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        for row, name in enumerate(values.to_pylist()):
            yield (str(path.parent / name) if name else ""), row, "image", ""
    elif pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
        for row in range(len(values)):
            yield str(path), row, "table", column
    else:
        raise InputError(f"{path}: column {column!r} holds {values.type}, neither paths nor arrays")


def read_array(item: Item, cache: dict[str, Any]) -> np.ndarray:
    """The sample an "array" or "table" item names (files opened once per worker, in ``cache``)."""
    if item.kind == "array":
        file, _, member = item.path.partition("[")
        if file not in cache:
            try:
                cache[file] = (
                    np.load(file, mmap_mode="r", allow_pickle=False)
                    if not member
                    else dict(np.load(file, allow_pickle=False))
                )
            except (OSError, ValueError) as exc:
                raise InputError(f"{file}: cannot read ({exc})") from None
        source = cache[file][member[:-1]] if member else cache[file]
        return np.array(source[item.row])
    if item.kind == "table":
        key = f"{item.path}\0{item.column}"
        if key not in cache:
            cache[key] = read_table(Path(item.path)).column(item.column)
        value = cache[key][item.row].as_py()
        if value is None:
            raise InputError(f"{item.path} row {item.row}: column {item.column!r} is empty")
        try:
            return np.asarray(value, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{item.path} row {item.row}: not a rectangular array ({exc})") from None
    raise InputError(f"{item.path}: item kind {item.kind!r} is not an array")
