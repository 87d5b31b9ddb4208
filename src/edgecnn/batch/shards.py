"""The output folder: committed shards, the job's manifest, and what a resumed job finds done.

Rows are written in shards (``part-00000.parquet`` or ``.jsonl``), each committed atomically: a
temporary file in the folder, fsync, rename, fsync of the folder. A shard either exists whole or not
at all, so after ``kill -9`` the committed shards hold every row once and a resumed job skips the
items they hold (``committed_indices``); temporary files of the dead job are removed. The manifest
(``_job.json``) records what the job is (model file, input listing, task options): a folder written
by another job is refused rather than mixed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from edgecnn.batch.items import import_pyarrow
from edgecnn.errors import InputError

FORMATS = ("parquet", "jsonl")
MANIFEST = "_job.json"
SHARD_NAME = re.compile(r"^part-(\d{5,})\.(parquet|jsonl)$")
TEMP_PREFIX = ".part-"

ARROW_KINDS = ("int64", "string", "int64_list", "float32_list", "string_list", "float32_list_list")


def arrow_schema(columns: Mapping[str, str]) -> Any:
    """The pyarrow schema of the job's columns (kinds as tasks.columns names them)."""
    pa = import_pyarrow()
    types = {
        "int64": pa.int64(),
        "string": pa.string(),
        "int64_list": pa.list_(pa.int64()),
        "float32_list": pa.list_(pa.float32()),
        "string_list": pa.list_(pa.string()),
        "float32_list_list": pa.list_(pa.list_(pa.float32())),
    }
    return pa.schema([(name, types[kind]) for name, kind in columns.items()])


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, write: Any) -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, then make it ``path`` in one step."""
    fd, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _fsync_dir(path.parent)


class ShardWriter:
    """Commits rows to the output folder in numbered shards (one writer per job)."""

    def __init__(self, folder: Path, columns: Mapping[str, str], output_format: str) -> None:
        if output_format not in FORMATS:
            raise InputError(f"output format must be one of {', '.join(FORMATS)}, got {output_format!r}")
        self.folder = folder
        self.columns = dict(columns)
        self.format = output_format
        self.schema = arrow_schema(columns) if output_format == "parquet" else None
        self.next_shard = 1 + max((n for n, _ in shard_files(folder)), default=-1)
        self.rows_written = 0
        self.errors_written = 0

    def commit(self, rows: Sequence[Mapping[str, Any]]) -> Path | None:
        """Write ``rows`` as the next shard; they are durable when this returns."""
        if not rows:
            return None
        path = self.folder / f"part-{self.next_shard:05d}.{self.format}"
        ordered = sorted(rows, key=lambda r: int(r["index"]))
        if self.format == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pylist([{c: r.get(c) for c in self.columns} for r in ordered], self.schema)
            write_atomically(path, lambda f: pq.write_table(table, f))
        else:
            text = "".join(
                json.dumps({c: r.get(c) for c in self.columns}, allow_nan=True) + "\n" for r in ordered
            )
            write_atomically(path, lambda f: f.write(text.encode("utf-8")))
        self.next_shard += 1
        self.rows_written += len(rows)
        self.errors_written += sum(1 for r in rows if r.get("error") is not None)
        return path


def shard_files(folder: Path) -> list[tuple[int, Path]]:
    """Committed shards, by number."""
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        match = SHARD_NAME.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def committed_indices(folder: Path) -> list[int]:
    """The ``index`` of every row the committed shards hold (repeats included, for checking)."""
    indices: list[int] = []
    for _, path in shard_files(folder):
        if path.suffix == ".parquet":
            import_pyarrow()
            import pyarrow.parquet as pq

            indices.extend(pq.read_table(path, columns=["index"]).column("index").to_pylist())
        else:
            with open(path, encoding="utf-8") as file:
                indices.extend(int(json.loads(line)["index"]) for line in file if line.strip())
    return indices


def read_rows(folder: Path) -> list[dict[str, Any]]:
    """Every committed row, ordered by index (for tests and small jobs; large ones read the shards
    with pyarrow.dataset or pandas)."""
    rows: list[dict[str, Any]] = []
    for _, path in shard_files(folder):
        if path.suffix == ".parquet":
            import_pyarrow()
            import pyarrow.parquet as pq

            rows.extend(pq.read_table(path).to_pylist())
        else:
            with open(path, encoding="utf-8") as file:
                rows.extend(json.loads(line) for line in file if line.strip())
    return sorted(rows, key=lambda r: int(r["index"]))


def prepare_folder(folder: Path, manifest: Mapping[str, Any]) -> None:
    """Create the output folder with its manifest, or check that it holds this same job (resume);
    temporary files a killed job left are removed."""
    folder.mkdir(parents=True, exist_ok=True)
    if not folder.is_dir():
        raise InputError(f"output {folder} is not a folder")
    path = folder / MANIFEST
    wanted = json.loads(json.dumps(manifest))
    if path.exists():
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"{path}: unreadable job manifest ({exc})") from None
        differ = sorted(k for k in set(found) | set(wanted) if found.get(k) != wanted.get(k))
        if differ:
            raise InputError(
                f"{folder} holds the output of another job ({', '.join(differ)} differ); "
                "resume with the same command, or write to a new folder"
            )
    else:
        if shard_files(folder):
            raise InputError(f"{folder} holds shards but no {MANIFEST}; write to a new folder")
        text = json.dumps(wanted, indent=2).encode("utf-8")
        write_atomically(path, lambda f: f.write(text))
    for stale in folder.glob(f"{TEMP_PREFIX}*"):
        with contextlib.suppress(OSError):
            stale.unlink()


def duplicates(indices: Iterable[int]) -> list[int]:
    """Indices that occur more than once."""
    seen: set[int] = set()
    repeated: set[int] = set()
    for i in indices:
        (repeated if i in seen else seen).add(i)
    return sorted(repeated)
