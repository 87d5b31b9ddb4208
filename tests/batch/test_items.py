"""Listing a batch job's inputs: every kind of input, numbered once, and what is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from edgecnn.batch.items import list_items, listing_digest, read_array
from edgecnn.errors import InputError


def test_folder_is_recursive_and_sorted(image_folder: Path) -> None:
    items = list_items([image_folder])
    assert [i.index for i in items] == list(range(41))
    assert [i.path for i in items] == sorted(i.path for i in items)
    assert any("deeper" in i.path for i in items) and all(i.kind == "image" for i in items)


def test_list_file_glob_and_image(tmp_path: Path, image_folder: Path) -> None:
    names = sorted(p.name for p in (image_folder / "a").glob("img*"))[:3]
    listing = image_folder / "a" / "list.txt"
    listing.write_text("# three of them\n" + "\n".join(names) + "\n\n", encoding="utf-8")
    try:
        items = list_items([listing, str(image_folder / "b" / "**" / "*.png"), image_folder / "a" / names[0]])
        pngs = sorted((image_folder / "b").rglob("*.png"))
        assert [i.path for i in items] == [
            *(str(image_folder / "a" / n) for n in names),
            *(str(p) for p in pngs),
            str(image_folder / "a" / names[0]),
        ]
        assert [i.index for i in items] == list(range(len(items)))
    finally:
        listing.unlink()  # the folder is shared: other tests count its files


def test_arrays_one_sample_per_row(tmp_path: Path) -> None:
    x = np.arange(3 * 2 * 4, dtype=np.float32).reshape(3, 2, 4)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "y.npz", first=x[:1], second=x[1:])
    items = list_items([tmp_path / "x.npy", tmp_path / "y.npz"])
    assert [(i.path.rsplit("/", 1)[-1], i.row) for i in items] == [
        ("x.npy", 0),
        ("x.npy", 1),
        ("x.npy", 2),
        ("y.npz[first]", 0),
        ("y.npz[second]", 0),
        ("y.npz[second]", 1),
    ]
    cache: dict = {}
    assert np.array_equal(read_array(items[4], cache), x[1])
    assert np.array_equal(read_array(items[2], cache), x[2])


def test_tables_of_paths_and_arrays(tmp_path: Path) -> None:
    pq.write_table(pa.table({"path": ["a.jpg", "b.jpg"], "label": [0, 1]}), tmp_path / "t.parquet")
    (tmp_path / "t.csv").write_text("image,label\nc.png,0\n", encoding="utf-8")
    vectors = pa.table({"x": [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]})
    pq.write_table(vectors, tmp_path / "v.parquet")
    items = list_items([tmp_path / "t.parquet", tmp_path / "t.csv"])
    assert [(i.path, i.row, i.kind) for i in items] == [
        (str(tmp_path / "a.jpg"), 0, "image"),
        (str(tmp_path / "b.jpg"), 1, "image"),
        (str(tmp_path / "c.png"), 0, "image"),
    ]
    arrays = list_items([tmp_path / "v.parquet"], column="x")
    assert [(i.row, i.kind) for i in arrays] == [(0, "table"), (1, "table"), (2, "table")]
    assert np.array_equal(read_array(arrays[2], {}), np.array([5.0, 6.0], np.float32))


def test_refusals_name_the_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        list_items([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="names no images"):
        list_items([tmp_path / "empty"])
    pq.write_table(pa.table({"n": [1, 2]}), tmp_path / "n.parquet")
    with pytest.raises(InputError, match="--column"):
        list_items([tmp_path / "n.parquet"])
    with pytest.raises(InputError, match="neither paths nor arrays"):
        list_items([tmp_path / "n.parquet"], column="n")
    np.save(tmp_path / "scalar.npy", np.float32(1))
    with pytest.raises(InputError, match="0-d"):
        list_items([tmp_path / "scalar.npy"])


def test_digest_changes_with_the_listing(image_folder: Path) -> None:
    items = list_items([image_folder])
    assert listing_digest(items) == listing_digest(list_items([image_folder]))
    assert listing_digest(items[:-1]) != listing_digest(items)
