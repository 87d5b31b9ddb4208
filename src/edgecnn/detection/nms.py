"""Detections and class-wise non-maximum suppression (greedy, as Darknet's ``do_nms_sort``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Detections:
    """Boxes of one image: ``boxes`` (K, 4) float32 corners x1, y1, x2, y2; ``scores`` (K,)
    float32; ``classes`` (K,) int64. A box that scores for several classes appears once per class."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray

    def __post_init__(self) -> None:
        count = len(self.scores)
        if self.boxes.shape != (count, 4) or self.classes.shape != (count,):
            raise ValueError(
                f"detections need boxes (K, 4), scores (K,), classes (K,); got "
                f"{self.boxes.shape}, {self.scores.shape}, {self.classes.shape}"
            )

    def __len__(self) -> int:
        return len(self.scores)

    def take(self, indices: np.ndarray) -> Detections:
        return Detections(self.boxes[indices], self.scores[indices], self.classes[indices])

    @staticmethod
    def empty() -> Detections:
        return Detections(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int64))

    @staticmethod
    def concatenate(parts: Sequence[Detections]) -> Detections:
        if not parts:
            return Detections.empty()
        return Detections(
            np.concatenate([p.boxes for p in parts]).astype(np.float32, copy=False),
            np.concatenate([p.scores for p in parts]).astype(np.float32, copy=False),
            np.concatenate([p.classes for p in parts]).astype(np.int64, copy=False),
        )


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Intersection over union of every box in ``a`` (N, 4) with every box in ``b`` (M, 4)."""
    a = np.asarray(a, np.float64)[:, None, :]
    b = np.asarray(b, np.float64)[None, :, :]
    inter_w = np.clip(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), 0, None)
    inter_h = np.clip(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), 0, None)
    inter = inter_w * inter_h
    area_a = np.clip(a[..., 2] - a[..., 0], 0, None) * np.clip(a[..., 3] - a[..., 1], 0, None)
    area_b = np.clip(b[..., 2] - b[..., 0], 0, None) * np.clip(b[..., 3] - b[..., 1], 0, None)
    union = area_a + area_b - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, 0.0)


BLOCK_ENTRIES = 1 << 18
"""IoU values computed at once in NMS: bounds its memory when thousands of boxes pass the threshold."""


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Indices of the boxes kept, best score first: a box is dropped when its IoU with a kept,
    better-scoring box exceeds ``iou_threshold``. Equal scores keep their input order."""
    return _greedy(np.asarray(boxes), np.asarray(scores), None, iou_threshold)


def _greedy(
    boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray | None, iou_threshold: float
) -> np.ndarray:
    """Greedy NMS (as :func:`nms`), where a box suppresses only boxes of its own class when
    ``classes`` is given. The IoUs of a block of candidates with every later box are computed in one
    numpy call; the greedy walk then only ORs rows of that block into the suppressed set."""
    if not 0.0 <= iou_threshold <= 1.0:
        raise ValueError(f"iou_threshold must be in [0, 1], got {iou_threshold}")
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
    boxes = boxes[order]
    labels = None if classes is None else classes[order]
    count = len(order)
    suppressed = np.zeros(count, bool)
    kept: list[int] = []
    step = max(1, BLOCK_ENTRIES // max(count, 1))
    for start in range(0, count, step):
        rows = start + np.flatnonzero(~suppressed[start : start + step])
        if not rows.size:
            continue
        # ~(iou <= threshold) rather than iou > threshold: a NaN IoU suppresses, as it always has
        overlap = ~(box_iou(boxes[rows], boxes[start:]) <= iou_threshold)
        if labels is not None:
            overlap &= labels[rows, None] == labels[None, start:]
        for row, candidate in zip(overlap, rows.tolist()):
            if not suppressed[candidate]:
                kept.append(candidate)
                suppressed[start:] |= row
    return order[np.asarray(kept, np.int64)]


def class_nms(detections: Detections, iou_threshold: float) -> Detections:
    """Non-maximum suppression within each class; the result is sorted by decreasing score (equal
    scores: lower class first, then input order)."""
    kept = _greedy(detections.boxes, detections.scores, detections.classes, iou_threshold)
    kept = kept[np.lexsort((detections.classes[kept], -detections.scores[kept]))]
    return detections.take(kept)
