"""Evaluation sets shipped with edgecnn, and top-1 agreement between two ways of running a model.

Quantisation is judged by how often the int8 model picks the float32 model's class (and, on a
labelled set, the right class). Two sets need no download:

- ``digits_set()``: the held-out split of scikit-learn's handwritten digits (labelled), with
  ``digits_classifier()``, a small LeNet-5 trained on the rest (``data/int8_eval``, see its README);
- ``scene_crops()``: natural-looking images for ImageNet-sized models, cut at seeded random
  positions, scales and flips from the bundled photographs (``data/vision``, ``data/simplecnn``)
  and normalised as ImageNet models expect. Unlabelled: only agreement between two runs means
  anything on them.

A runner is any callable from one input batch to the first output's scores, so edgecnn models,
onnxruntime sessions or another engine compare alike (``model_runner``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, overload

import numpy as np

from edgecnn.errors import InputError

if TYPE_CHECKING:
    from edgecnn.ir.graph import Graph
    from edgecnn.model import Model

Runner = Callable[[np.ndarray], np.ndarray]
"""One input batch -> the scores (first output) for it."""

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
PHOTOS = ("vision/scene.jpg", "simplecnn/samples/face.jpg", "simplecnn/samples/bg.jpg")
"""The bundled photographs (relative to edgecnn/data) that ``scene_crops`` cuts from."""


def data_dir() -> Path:
    return Path(str(resources.files("edgecnn") / "data"))


@dataclass(frozen=True)
class EvalSet:
    """Inputs of one model input's shape ``(1, C, H, W)`` each, and their classes when known."""

    name: str
    inputs: Sequence[np.ndarray]
    labels: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.labels is not None and len(self.labels) != len(self.inputs):
            raise InputError(f"{self.name}: {len(self.labels)} labels for {len(self.inputs)} inputs")


def digits_set(size: int = 28) -> EvalSet:
    """The held-out digits (359 images, 0..1, bilinear from 8x8 to ``size`` x ``size``) and labels."""
    images = _digit_inputs(_shipped_digits("images"), size)
    return EvalSet("digits/held-out", images, _shipped_digits("labels").astype(np.int64))


def _shipped_digits(key: str) -> np.ndarray:
    with np.load(data_dir() / "int8_eval" / "digits_test.npz") as archive:
        return np.asarray(archive[key])


def _digit_inputs(images: np.ndarray, size: int) -> list[np.ndarray]:
    """8x8 digits (0..16) -> (1, 1, size, size) inputs in 0..1, bilinear as edgecnn.train's digits."""
    from edgecnn.train.data.digits import upsample

    if size < 8:
        raise InputError(f"digits are 8x8: size must be >= 8, got {size}")
    pixels = np.clip(upsample(images.astype(np.float32) / 16.0, size), 0.0, 1.0)
    return list(pixels[:, None, None])


def digits_calibration(size: int = 28) -> list[np.ndarray]:
    """64 digits of the classifier's training split (none held out), scaled as ``digits_set``'s:
    the calibration inputs for quantising ``digits_classifier()``."""
    return _digit_inputs(_shipped_digits("calibration"), size)


def digits_classifier() -> Graph:
    """The float32 LeNet-5 (widths 8, 16, 64) trained on the digits that ``digits_set`` leaves out."""
    from edgecnn.format import load_ecnn

    return load_ecnn(data_dir() / "int8_eval" / "digits_lenet5.ecnn")


class _Crops(Sequence[np.ndarray]):
    """Seeded crops, made when read (a few hundred 224x224 inputs would hold ~180 MB at once)."""

    def __init__(self, count: int, shape: tuple[int, int, int], seed: int, imagenet: bool):
        from PIL import Image

        self.size, self.shape, self.seed, self.imagenet = count, shape, seed, imagenet
        self.photos = []
        for name in PHOTOS:
            with Image.open(data_dir() / name) as opened:
                self.photos.append(opened.convert("RGB"))

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, index: int) -> np.ndarray: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[np.ndarray]: ...

    def __getitem__(self, index: int | slice) -> np.ndarray | Sequence[np.ndarray]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.size))]
        if not -self.size <= index < self.size:
            raise IndexError(index)
        return self.crop(index % self.size)

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self.crop(i) for i in range(self.size))

    def crop(self, index: int) -> np.ndarray:
        """Crop ``index``: a photo, a box of 10-100% of its area at aspect 3/4..4/3, a mirror flip
        half the time, brightness and contrast within +-20%, resized to the input."""
        from PIL import Image

        from edgecnn.vision.preprocess import Preprocess

        rng = np.random.default_rng((self.seed, index))
        photo = self.photos[int(rng.integers(len(self.photos)))]
        width, height = photo.size
        area = rng.uniform(0.1, 1.0) * width * height
        aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        w = int(min(width, max(8, round(np.sqrt(area * aspect)))))
        h = int(min(height, max(8, round(np.sqrt(area / aspect)))))
        left, top = int(rng.integers(width - w + 1)), int(rng.integers(height - h + 1))
        channels, rows, cols = self.shape
        image = photo.crop((left, top, left + w, top + h)).resize((cols, rows), Image.Resampling.BILINEAR)
        if rng.random() < 0.5:
            image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        pixels = np.asarray(image, np.float32) / np.float32(255.0)
        mean = pixels.mean()
        pixels = (pixels - mean) * np.float32(rng.uniform(0.8, 1.2)) + mean * np.float32(
            rng.uniform(0.8, 1.2)
        )
        pixels = np.clip(pixels, 0.0, 1.0)
        if channels == 1:
            pixels = pixels @ np.asarray([0.299, 0.587, 0.114], np.float32)[:, None]
        normalise = Preprocess(
            grayscale=channels == 1,
            mean=IMAGENET_MEAN[:channels] if self.imagenet and channels == 3 else (),
            std=IMAGENET_STD[:channels] if self.imagenet and channels == 3 else (),
        )
        return normalise.normalize(pixels)[None]


def scene_crops(count: int, shape: Sequence[int], *, seed: int = 0, imagenet: bool = True) -> EvalSet:
    """``count`` natural-looking inputs of ``shape`` ((1, C, H, W) or (C, H, W), C 1 or 3): RGB in
    0..1, ImageNet mean/std normalised when ``imagenet`` (Darknet models take plain 0..1)."""
    dims = tuple(int(d) for d in shape)
    if len(dims) == 4 and dims[0] == 1:
        dims = dims[1:]
    if len(dims) != 3 or dims[0] not in (1, 3) or min(dims[1:]) < 1:
        raise InputError(f"scene crops need a (1, C, H, W) image input with C 1 or 3, got {tuple(shape)}")
    if count < 1:
        raise InputError(f"count must be >= 1, got {count}")
    return EvalSet(f"scene crops (seed {seed})", _Crops(count, (dims[0], dims[1], dims[2]), seed, imagenet))


@dataclass(frozen=True)
class Top1:
    """How a candidate run follows a reference run on one evaluation set."""

    samples: int
    agreement: float  # share of samples whose candidate top-1 class is the reference's
    max_abs_diff: float  # largest |candidate - reference| score over all samples
    reference_accuracy: float | None = None  # on a labelled set
    candidate_accuracy: float | None = None


def top1_agreement(reference: Runner, candidate: Runner, data: EvalSet) -> Top1:
    """Run both on every input of ``data`` and compare their top-1 classes (first score axis after
    the batch, flattened)."""
    from edgecnn.compress.sensitivity import top1

    matches = right_ref = right_cand = total = 0
    worst = 0.0
    for i, x in enumerate(data.inputs):
        expected, actual = np.asarray(reference(x)), np.asarray(candidate(x))
        if expected.shape != actual.shape:
            raise InputError(f"{data.name}: output shapes differ, {expected.shape} and {actual.shape}")
        want, got = top1(expected), top1(actual)
        matches += int(np.sum(want == got))
        total += want.size
        worst = max(worst, float(np.max(np.abs(expected.astype(np.float64) - actual))))
        if data.labels is not None:
            right_ref += int(np.sum(want == data.labels[i]))
            right_cand += int(np.sum(got == data.labels[i]))
    if total == 0:
        raise InputError(f"{data.name}: no inputs to evaluate")
    labelled = data.labels is not None
    return Top1(
        total,
        matches / total,
        worst,
        right_ref / total if labelled else None,
        right_cand / total if labelled else None,
    )


def model_runner(model: Model) -> Runner:
    """The runner of an edgecnn model: its first output for one input batch."""
    output = model.graph.outputs[0]
    return lambda x: model.run(x)[output]
