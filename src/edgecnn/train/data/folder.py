"""Image folders: one subfolder per class (its name is the class), images read with Pillow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from edgecnn.errors import InputError, ModelFormatError
from edgecnn.train.data.dataset import Dataset
from edgecnn.vision.preprocess import open_image

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".pgm", ".ppm", ".tif", ".tiff", ".webp")


def read_image(path: Path, size: tuple[int, int], channels: int) -> np.ndarray:
    """(channels, H, W) float32 in 0..1; grayscale for 1 channel, RGB for 3."""
    try:
        with open_image(path) as image:
            converted = image.convert("L" if channels == 1 else "RGB").resize(
                (size[1], size[0]), Image.Resampling.BILINEAR
            )
    except (UnidentifiedImageError, OSError) as exc:
        raise ModelFormatError(f"{path}: cannot read the image: {exc}") from None
    array = np.asarray(converted, np.float32) / 255.0
    return array[None] if channels == 1 else array.transpose(2, 0, 1)


def load_image_folder(folder: Path, size: tuple[int, int] = (28, 28), channels: int = 1) -> Dataset:
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder (expected one subfolder of images per class)")
    if channels not in (1, 3):
        raise InputError(f"image folders load 1 or 3 channels, not {channels}")
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    images, labels = [], []
    for label, name in enumerate(classes):
        for path in sorted((folder / name).iterdir()):
            if path.suffix.lower() in IMAGE_SUFFIXES:
                images.append(read_image(path, size, channels))
                labels.append(label)
    if not images:
        raise InputError(f"{folder}: no images found in subfolders ({', '.join(classes) or 'none'})")
    return Dataset(np.stack(images), np.asarray(labels, np.int64), tuple(classes), folder.name)
