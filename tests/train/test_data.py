"""Datasets: IDX reading (and its refusals), image folders, digits, stratified seeded splits."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edgecnn.errors import InputError, ModelFormatError
from edgecnn.train.data import Dataset, load_dataset, load_image_folder, load_mnist, parse_idx


def idx_bytes(array: np.ndarray, code: int = 0x08) -> bytes:
    return (
        struct.pack(">HBB", 0, code, array.ndim)
        + struct.pack(f">{array.ndim}I", *array.shape)
        + array.tobytes()
    )


def write_mnist(folder: Path, n_train: int = 12, n_test: int = 6, gz: bool = False) -> None:
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        for kind, array in (("images-idx3", images), ("labels-idx1", labels)):
            data = idx_bytes(array)
            name = f"{prefix}-{kind}-ubyte"
            if gz:
                (folder / f"{name}.gz").write_bytes(gzip.compress(data))
            else:
                (folder / name).write_bytes(data)


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_folder_round_trip(tmp_path: Path, gz: bool) -> None:
    write_mnist(tmp_path / "mnist", gz=gz)
    train, test = load_mnist(tmp_path / "mnist")
    assert train.images.shape == (12, 1, 28, 28) and test.images.shape == (6, 1, 28, 28)
    assert train.images.dtype == np.float32 and train.images.min() >= 0.0 and train.images.max() <= 1.0
    assert list(train.labels[:3]) == [0, 1, 2] and train.classes == tuple(str(d) for d in range(10))
    again, _ = load_dataset(f"idx:{tmp_path / 'mnist'}")
    assert np.array_equal(again.images, train.images)


def test_parse_idx_types_and_shapes() -> None:
    values = np.arange(6, dtype=">i4").reshape(2, 3)
    np.testing.assert_array_equal(parse_idx(idx_bytes(values, 0x0C), "x"), values)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x00", "too short"),
        (b"\x12\x34\x08\x01\x00\x00\x00\x01\x00", "not an IDX file"),
        (b"\x00\x00\x07\x01\x00\x00\x00\x01\x00", "unknown IDX element type 0x07 at offset 2"),
        (b"\x00\x00\x08\x00", "rank 0"),
        (b"\x00\x00\x08\x03\x00\x00\x00\x02", "needs 16 bytes"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x05\x01\x02", "needs 5 data bytes after offset 8, the file has 2"),
    ],
)
def test_damaged_idx_is_a_format_error(data: bytes, message: str) -> None:
    with pytest.raises(ModelFormatError, match=message):
        parse_idx(data, "damaged.idx")


def test_mnist_folder_refusals(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a folder"):
        load_mnist(tmp_path / "missing")
    write_mnist(tmp_path / "m")
    (tmp_path / "m" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(InputError, match="no t10k-labels-idx1-ubyte"):
        load_mnist(tmp_path / "m")
    write_mnist(tmp_path / "m")
    (tmp_path / "m" / "t10k-labels-idx1-ubyte").write_bytes(idx_bytes(np.zeros(5, np.uint8)))
    with pytest.raises(InputError, match="6 images but labels of shape"):
        load_mnist(tmp_path / "m")
    (tmp_path / "m" / "train-images-idx3-ubyte").write_bytes(b"\x1f\x8bbroken")
    with pytest.raises(ModelFormatError, match="damaged gzip"):
        load_mnist(tmp_path / "m")


def write_folder(root: Path, per_class: int = 5) -> None:
    rng = np.random.default_rng(1)
    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            Image.fromarray(rng.integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(root / name / f"{i}.png")
    (root / "dog" / "notes.txt").write_text("not an image")


def test_image_folder(tmp_path: Path) -> None:
    write_folder(tmp_path / "pets")
    data = load_image_folder(tmp_path / "pets", (16, 12), channels=3)
    assert data.images.shape == (10, 3, 16, 12) and data.classes == ("cat", "dog")
    assert list(data.labels) == [0] * 5 + [1] * 5
    train, test = load_dataset(f"folder:{tmp_path / 'pets'}", (28, 28), 1, test_fraction=0.4)
    assert train.images.shape[1:] == (1, 28, 28) and len(test) == 4 and sorted(test.labels) == [0, 0, 1, 1]
    (tmp_path / "pets" / "cat" / "broken.jpg").write_bytes(b"nope")
    with pytest.raises(ModelFormatError, match=r"broken\.jpg"):
        load_image_folder(tmp_path / "pets")
    (tmp_path / "empty" / "a").mkdir(parents=True)
    with pytest.raises(InputError, match="no images"):
        load_image_folder(tmp_path / "empty")


def test_split_is_stratified_seeded_and_disjoint() -> None:
    labels = np.repeat(np.arange(3), 10)
    data = Dataset(np.arange(30, dtype=np.float32).reshape(30, 1, 1, 1), labels, ("a", "b", "c"))
    train, test = data.split(0.2, seed=4)
    again, _ = data.split(0.2, seed=4)
    other, _ = data.split(0.2, seed=5)
    assert np.bincount(test.labels).tolist() == [2, 2, 2]
    assert not set(train.images.ravel()) & set(test.images.ravel())
    assert np.array_equal(train.images, again.images) and not np.array_equal(train.images, other.images)
    with pytest.raises(InputError):
        data.split(1.0)
    with pytest.raises(InputError, match="dataset 'mnist'"):
        load_dataset("mnist")


def test_digits_are_upsampled_to_28x28() -> None:
    pytest.importorskip("sklearn")
    train, test = load_dataset("digits")
    assert len(train) + len(test) == 1797 and train.images.shape[1:] == (1, 28, 28)
    assert train.images.min() >= 0.0 and train.images.max() <= 1.0
    assert np.bincount(test.labels).min() >= 35


def test_a_decompression_bomb_in_an_image_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "faces").mkdir()
    Image.new("L", (9500, 9500)).save(tmp_path / "faces" / "bomb.png")  # over Pillow's pixel limit
    with pytest.raises(InputError, match="decompression bomb"):
        load_image_folder(tmp_path, (28, 28), 1)
