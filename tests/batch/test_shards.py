"""Committed shards: atomic, resumable, refusing another job's folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgecnn.batch.shards import (
    MANIFEST,
    ShardWriter,
    committed_indices,
    duplicates,
    prepare_folder,
    read_rows,
    shard_files,
)
from edgecnn.errors import InputError

COLUMNS = {"index": "int64", "path": "string", "row": "int64", "error": "string", "top_score": "float32_list"}


@pytest.mark.parametrize("output_format", ["parquet", "jsonl"])
def test_shards_round_trip_and_continue_numbering(tmp_path: Path, output_format: str) -> None:
    prepare_folder(tmp_path, {"job": 1})
    writer = ShardWriter(tmp_path, COLUMNS, output_format)
    writer.commit([{"index": 3, "path": "c", "row": None, "top_score": [0.5]}, {"index": 1, "path": "a"}])
    writer.commit([{"index": 2, "path": "b", "row": 7, "error": "bad"}])
    assert writer.commit([]) is None
    again = ShardWriter(tmp_path, COLUMNS, output_format)
    again.commit([{"index": 0, "path": "z"}])
    assert [n for n, _ in shard_files(tmp_path)] == [0, 1, 2]
    assert sorted(committed_indices(tmp_path)) == [0, 1, 2, 3]
    rows = read_rows(tmp_path)
    assert [r["index"] for r in rows] == [0, 1, 2, 3]
    assert rows[3]["top_score"] == [0.5] and rows[1]["top_score"] is None
    assert rows[2] == {"index": 2, "path": "b", "row": 7, "error": "bad", "top_score": None}
    assert (writer.rows_written, writer.errors_written) == (3, 1)


def test_manifest_guards_the_folder(tmp_path: Path) -> None:
    prepare_folder(tmp_path, {"model": "m", "items": 3})
    (tmp_path / ".part-stale").write_bytes(b"half a shard")
    prepare_folder(tmp_path, {"model": "m", "items": 3})  # the same job resumes
    assert not (tmp_path / ".part-stale").exists()
    with pytest.raises(InputError, match="items differ"):
        prepare_folder(tmp_path, {"model": "m", "items": 4})
    assert json.loads((tmp_path / MANIFEST).read_text()) == {"model": "m", "items": 3}
    other = tmp_path / "other"
    other.mkdir()
    ShardWriter(other, COLUMNS, "jsonl").commit([{"index": 0, "path": "x"}])
    with pytest.raises(InputError, match=r"no _job\.json"):
        prepare_folder(other, {"model": "m"})


def test_duplicates() -> None:
    assert duplicates([3, 1, 3, 2, 1, 3]) == [1, 3]
    assert duplicates([]) == []
