"""Training data: scikit-learn's digits, MNIST IDX files and image folders, as ``Dataset``."""

from __future__ import annotations

from pathlib import Path

from edgecnn.errors import InputError
from edgecnn.train.data.dataset import Dataset
from edgecnn.train.data.digits import load_digits
from edgecnn.train.data.folder import load_image_folder
from edgecnn.train.data.idx import load_mnist, parse_idx, read_idx

__all__ = [
    "Dataset",
    "load_dataset",
    "load_digits",
    "load_image_folder",
    "load_mnist",
    "parse_idx",
    "read_idx",
]


def load_dataset(
    spec: str, size: tuple[int, int] = (28, 28), channels: int = 1, test_fraction: float = 0.2, seed: int = 0
) -> tuple[Dataset, Dataset]:
    """(train, test) from ``digits``, ``idx:DIR`` (MNIST files; its own test split) or ``folder:DIR``.

    digits and folders hold out ``test_fraction`` of every class, chosen by ``seed``."""
    kind, _, where = spec.partition(":")
    if kind == "digits" and not where:
        if size[0] != size[1]:
            raise InputError(f"digits are square; got size {size}")
        return load_digits(size[0]).split(test_fraction, seed)
    if kind == "idx" and where:
        return load_mnist(Path(where))
    if kind == "folder" and where:
        return load_image_folder(Path(where), size, channels).split(test_fraction, seed)
    raise InputError(
        f"dataset {spec!r}: use digits, idx:DIR (MNIST IDX files) or folder:DIR (a subfolder per class)"
    )
