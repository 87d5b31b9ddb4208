"""A face detector from the bundled SimpleCNN face/background classifier (seed 002).

The classifier sees one 128x128 BGR window scaled to [0, 1] and says face or background. To find
faces of any size, the image is rescaled so that a face of side ``scale x shorter image side``
becomes 128 pixels (an image pyramid, one level per scale), a 128x128 window slides over each
level (``stride`` is the step as a fraction of the window), every window goes through the
classifier in batches, and the windows whose face probability passes the threshold are merged by
non-maximum suppression.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgecnn.detection.nms import Detections, class_nms
from edgecnn.errors import InputError
from edgecnn.vision.detector import (
    Detection,
    Detector,
    Inferred,
    Prepared,
    check_thresholds,
    to_detections,
)

if TYPE_CHECKING:
    from PIL import Image

    from edgecnn.model import Model

WINDOW = 128
DEFAULT_SCALES = (1.0, 0.7, 0.5, 0.35, 0.25)
"""Window sides as fractions of the image's shorter side: faces from a quarter of the image to all of it."""
FACE_CLASS = 1  # the classifier's outputs are (background, face) logits
BUNDLED_MODEL = "simplecnn/face_binary_cls.onnx"


def bundled_path(relative: str) -> Path:
    """Path of a file shipped in the package's data directory."""
    return Path(str(resources.files("edgecnn") / "data" / relative))


@dataclass(frozen=True)
class Pyramid(Prepared):
    """An image's pyramid levels (BGR, [0, 1], HWC) with the window positions of each."""

    levels: tuple[np.ndarray, ...]
    ratios: tuple[float, ...]  # level pixels per source pixel
    positions: tuple[np.ndarray, ...]  # (K, 2) window corners x, y in level pixels

    @property
    def windows(self) -> int:
        return sum(len(p) for p in self.positions)

    def window_boxes(self) -> np.ndarray:
        """(K, 4) window corners in source pixels, in scan order."""
        boxes = [np.hstack([p, p + WINDOW]) / r for p, r in zip(self.positions, self.ratios)]
        return np.concatenate(boxes).astype(np.float32) if boxes else np.zeros((0, 4), np.float32)

    def batches(self, size: int) -> list[np.ndarray]:
        """The windows as [n, 3, 128, 128] tensors of at most ``size`` windows each."""
        crops = [
            level[y : y + WINDOW, x : x + WINDOW]
            for level, positions in zip(self.levels, self.positions)
            for x, y in positions
        ]
        return [
            np.ascontiguousarray(np.stack(crops[i : i + size]).transpose(0, 3, 1, 2))
            for i in range(0, len(crops), size)
        ]


@dataclass(frozen=True)
class WindowScores(Inferred):
    """The face probability of every window of a pyramid, in scan order."""

    pyramid: Pyramid
    scores: np.ndarray


def _positions(length: int, step: int) -> np.ndarray:
    """Window starts along one axis: every ``step`` pixels, plus one flush with the far edge."""
    starts = list(range(0, length - WINDOW + 1, step))
    if starts[-1] != length - WINDOW:
        starts.append(length - WINDOW)
    return np.asarray(starts, np.int64)


def batched_model(net: Model) -> Model:
    """The classifier with its input's batch size left free, so that windows run in batches."""
    from edgecnn.model import Model

    graph = net.graph.copy()
    spec = graph.inputs[0]
    assert spec.shape is not None
    graph.inputs[0] = dataclasses.replace(spec, shape=("windows", *spec.shape[1:]))
    return Model(graph, net.options)


class FaceDetector(Detector):
    """Sliding-window face detection with the bundled classifier (see the module docstring)."""

    def __init__(
        self,
        net: Model,
        *,
        scales: Sequence[float] = DEFAULT_SCALES,
        stride: float = 0.25,
        score_threshold: float = 0.9,
        iou_threshold: float = 0.3,
        batch_size: int = 64,
    ) -> None:
        check_thresholds(score_threshold, iou_threshold)
        if not scales or any(not 0 < s <= 1 for s in scales):
            raise InputError(f"face scales must be fractions in (0, 1], got {list(scales)}")
        if not 0 < stride <= 1:
            raise InputError(f"face stride must be a fraction of the window in (0, 1], got {stride}")
        if batch_size < 1:
            raise InputError(f"batch size must be positive, got {batch_size}")
        self.net = net
        self.scales = tuple(sorted(scales, reverse=True))
        self.step = max(1, round(stride * WINDOW))
        self.score_threshold = score_threshold
        self.iou_threshold = iou_threshold
        self.batch_size = batch_size
        self.description = (
            f"SimpleCNN face classifier (128x128, BSD-3-Clause) scanned at scales "
            f"{', '.join(f'{s:g}' for s in self.scales)}, stride {self.step} px, batches of {batch_size}"
        )

    @classmethod
    def bundled(cls, *, threads: int | None = None, **options: Any) -> FaceDetector:
        """The detector over the classifier shipped with edgecnn."""
        from edgecnn.api import load

        return cls(batched_model(load(bundled_path(BUNDLED_MODEL), threads=threads)), **options)

    def prepare(self, image: Image.Image) -> Pyramid:
        from PIL import Image

        rgb = image.convert("RGB")
        shorter = min(rgb.size)
        levels, ratios, positions = [], [], []
        for scale in self.scales:
            ratio = WINDOW / (scale * shorter)
            size = (max(WINDOW, round(rgb.width * ratio)), max(WINDOW, round(rgb.height * ratio)))
            level = np.asarray(rgb.resize(size, Image.Resampling.BILINEAR), np.float32)[:, :, ::-1] / 255
            xs, ys = _positions(size[0], self.step), _positions(size[1], self.step)
            grid = np.stack(np.meshgrid(xs, ys, indexing="xy"), axis=-1).reshape(-1, 2)
            levels.append(level)
            ratios.append(size[0] / rgb.width)
            positions.append(grid)
        return Pyramid(tuple(levels), tuple(ratios), tuple(positions))

    def face_scores(self, pyramid: Pyramid, threads: int | None = None) -> np.ndarray:
        """Face probability of every window of ``pyramid``, in scan order, on at most ``threads``
        threads (None: the model's own)."""
        scores = []
        for batch in pyramid.batches(self.batch_size):
            (logits,) = self.net.run(batch, threads=threads).values()
            logits = np.asarray(logits, np.float64)
            shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
            scores.append(shifted[:, FACE_CLASS] / shifted.sum(axis=1))
        return np.concatenate(scores) if scores else np.zeros(0)

    def infer(self, prepared: Sequence[Prepared], threads: int | None = None) -> list[Inferred]:
        pyramids = [p for p in prepared if isinstance(p, Pyramid)]
        if len(pyramids) != len(prepared):
            raise InputError("FaceDetector.infer takes what its own prepare() returned")
        return [WindowScores(pyramid, self.face_scores(pyramid, threads)) for pyramid in pyramids]

    def finish(self, inferred: Inferred) -> list[Detection]:
        if not isinstance(inferred, WindowScores):
            raise InputError("FaceDetector.finish takes what its own infer() returned")
        scores = inferred.scores
        keep = np.flatnonzero(scores > self.score_threshold)
        found = Detections(
            inferred.pyramid.window_boxes()[keep],
            scores[keep].astype(np.float32),
            np.zeros(len(keep), np.int64),
        )
        return to_detections(class_nms(found, self.iou_threshold), ["face"])
