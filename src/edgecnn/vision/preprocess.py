"""Turning image files (or saved arrays) into the float tensor a CNN expects.

The same steps every training pipeline applies, in this order: decode, resize, channel order,
``x * scale``, ``(x - mean) / std``, layout. Mean and std are given in the scale's units
(e.g. ``scale=1/255, mean=0.485,0.456,0.406``)."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edgecnn.errors import EdgeCNNError, InputError

if TYPE_CHECKING:
    import PIL.Image
from edgecnn.limits import MemoryBudget, regular_file_size

LAYOUTS = ("nchw", "nhwc")


@dataclass(frozen=True)
class Preprocess:
    size: tuple[int, int] | None = None  # (height, width); None keeps the image's own size
    channel_order: str = "rgb"  # "rgb" or "bgr" (Caffe- and OpenCV-trained models)
    scale: float = 1.0
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    layout: str = "nchw"
    grayscale: bool = False

    def __post_init__(self) -> None:
        if self.channel_order not in ("rgb", "bgr"):
            raise InputError(f"channel order must be 'rgb' or 'bgr', got {self.channel_order!r}")
        if self.layout not in LAYOUTS:
            raise InputError(f"layout must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        if self.size is not None and (len(self.size) != 2 or min(self.size) < 1):
            raise InputError(f"size must be two positive integers (height, width), got {self.size}")
        channels = 1 if self.grayscale else 3
        for label, values in (("mean", self.mean), ("std", self.std)):
            if len(values) not in (0, 1, channels):
                raise InputError(f"{label} needs 1 or {channels} values, got {len(values)}")
        if any(s == 0 for s in self.std):
            raise InputError("std values must be non-zero")
        if not all(math.isfinite(v) for v in (self.scale, *self.mean, *self.std)):
            raise InputError("scale, mean and std must be finite numbers")

    def image(self, path: str | os.PathLike[str], budget: MemoryBudget | None = None) -> np.ndarray:
        """One image file -> float32 array of shape [1, C, H, W] (or [1, H, W, C]). ``budget`` bounds
        the file's size (default ``MemoryBudget.default()``, read from the OS at each call: callers
        that read many files pass one)."""
        from PIL import Image, UnidentifiedImageError

        input_file_size(path, budget)
        mode = "L" if self.grayscale else "RGB"
        try:
            with open_image(path) as opened:
                img = opened if opened.mode == mode else opened.convert(mode)
                if self.size is not None and img.size != (self.size[1], self.size[0]):
                    img = img.resize((self.size[1], self.size[0]), Image.Resampling.BILINEAR)
                pixels = np.asarray(img)
        except FileNotFoundError:
            raise InputError(f"input file not found: {path}") from None
        except (UnidentifiedImageError, OSError) as exc:
            raise InputError(f"{path}: not an image Pillow can read ({exc})") from None
        if pixels.ndim == 2:
            pixels = pixels[:, :, None]
        if self.channel_order == "bgr":
            pixels = pixels[:, :, ::-1]
        return self.normalize(pixels)[None]

    def normalize(self, pixels: np.ndarray) -> np.ndarray:
        """HWC pixels (8-bit or float) -> scaled, normalised CHW or HWC float32 array.

        Each step writes into the result, so the image is converted to float once and no
        temporaries of its size are made; the arithmetic is the same float32 operations, in the same
        order, as ``(x.astype(float32) * scale - mean) / std``."""
        x = pixels.transpose(2, 0, 1) if self.layout == "nchw" else pixels
        channels = (-1, 1, 1) if self.layout == "nchw" else (-1,)
        out = np.empty(x.shape, np.float32)
        np.multiply(x, np.float32(self.scale), out=out, dtype=np.float32)
        if self.mean:
            np.subtract(out, np.asarray(self.mean, dtype=np.float32).reshape(channels), out=out)
        if self.std:
            np.divide(out, np.asarray(self.std, dtype=np.float32).reshape(channels), out=out)
        return out


def open_image(path: str | os.PathLike[str]) -> PIL.Image.Image:
    """``Image.open(path)``, except that an image over Pillow's pixel limit is an InputError: a
    file of a few KB can declare gigapixels, and below twice the limit Pillow only warns."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return Image.open(path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise InputError(f"{os.fspath(path)}: refused as a decompression bomb ({exc})") from None


def parse_shape(text: str, label: str = "shape", example: str = "1x3x224x224") -> tuple[int, ...]:
    """'1x3x224x224' -> (1, 3, 224, 224)."""
    try:
        dims = tuple(int(p) for p in text.lower().split("x"))
    except ValueError:
        raise InputError(f"{label} must look like {example}, got {text!r}") from None
    if min(dims) < 1:
        raise InputError(f"{label} dimensions must be positive, got {text!r}")
    return dims


def parse_size(text: str) -> tuple[int, int]:
    """'224x224' or '224' -> (224, 224)."""
    dims = parse_shape(text, "size", "HxW (e.g. 224x224)")
    if len(dims) == 1:
        dims = dims * 2
    if len(dims) != 2:
        raise InputError(f"size must look like HxW (e.g. 224x224), got {text!r}")
    return dims[0], dims[1]


def parse_floats(text: str, label: str) -> tuple[float, ...]:
    """'0.485,0.456,0.406' -> (0.485, 0.456, 0.406); nan and inf refused."""
    try:
        values = tuple(float(p) for p in text.split(","))
    except ValueError:
        raise InputError(f"{label} must be comma-separated numbers, got {text!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise InputError(f"{label} must be finite numbers, got {text!r}")
    return values


def input_file_size(path: str | os.PathLike[str], budget: MemoryBudget | None = None) -> int:
    """The size of an input file, refused (InputError) unless it is a regular file within the
    memory budget (default ``MemoryBudget.default()``): a FIFO or a device would never end."""
    try:
        size = regular_file_size(path, "input file")
        (budget or MemoryBudget.default()).check(size, f"input file {os.fspath(path)}", InputError)
    except InputError:
        raise
    except EdgeCNNError as exc:
        raise InputError(str(exc)) from None
    return size


def load_array(path: str | os.PathLike[str]) -> np.ndarray:
    """A saved .npy tensor, refused if it holds Python objects (which could run code)."""
    input_file_size(path)
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"input file not found: {path}") from None
    except ValueError as exc:
        raise InputError(f"{path}: not a plain .npy array ({exc})") from None


def load_inputs(paths: Sequence[str | os.PathLike[str]], preprocess: Preprocess) -> list[np.ndarray]:
    """Each path as one input tensor: .npy files as saved, anything else decoded as an image."""
    return [load_array(p) if Path(p).suffix.lower() == ".npy" else preprocess.image(p) for p in paths]
