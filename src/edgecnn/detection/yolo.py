"""YOLO decoders: raw network outputs -> boxes, scores and classes, following Darknet's formulas.

The raw tensors are what a Darknet model imported by edgecnn outputs: the input of each
``[detection]`` (YOLOv1), ``[region]`` (YOLOv2) or ``[yolo]`` (YOLOv3) layer, before any of that
layer's activations, with a batch axis first. Boxes come out as corners ``x1, y1, x2, y2`` in
pixels of the *network input* (0..width, 0..height); divide by ``input_size`` for normalised
coordinates, or use :func:`undo_letterbox` to map them onto the original image. A box is listed
once per class whose score (objectness x class probability) exceeds ``score_threshold``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Union

import numpy as np

from edgecnn.detection.nms import Detections, class_nms

METADATA_PREFIX = "darknet.detection:"
"""Graph.metadata key prefix; the key's rest is the raw output's tensor name."""


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def _corners(cx: np.ndarray, cy: np.ndarray, w: np.ndarray, h: np.ndarray) -> np.ndarray:
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=-1).reshape(-1, 4)


@dataclass(frozen=True)
class _GridDecoder:
    """Shared driver: per image, candidate boxes and class scores, then thresholding."""

    input_size: tuple[int, int]  # network input (width, height) in pixels
    kind: ClassVar[str]

    def candidates(self, raw: np.ndarray, score_threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """One image's boxes (B, 4) in input pixels and class scores (B, classes), in Darknet's
        order; a decoder may leave out boxes that cannot score above ``score_threshold``."""
        raise NotImplementedError

    def __call__(self, raw: np.ndarray, score_threshold: float = 0.25) -> list[Detections]:
        """Decode a batch of raw outputs; one :class:`Detections` per image (before NMS)."""
        raw = np.asarray(raw)
        results = []
        for image in raw:
            with np.errstate(over="ignore"):
                boxes, scores = self.candidates(image, score_threshold)
            box_index, label = np.nonzero(scores > score_threshold)
            results.append(
                Detections(
                    boxes[box_index].astype(np.float32),
                    scores[box_index, label].astype(np.float32),
                    label.astype(np.int64),
                )
            )
        return results

    def to_metadata(self, **extra: Any) -> str:
        """JSON for Graph.metadata: the decoder's fields plus ``extra`` (e.g. the cfg options)."""
        return json.dumps({"type": self.kind, "decoder": asdict(self), **extra})

    def _check_channels(self, raw: np.ndarray, per_anchor: int, anchors: int) -> tuple[int, int]:
        if raw.ndim != 3 or raw.shape[0] != per_anchor * anchors:
            raise ValueError(
                f"{self.kind} output must be ({per_anchor * anchors}, H, W) per image, got {raw.shape}"
            )
        return raw.shape[1], raw.shape[2]


@dataclass(frozen=True)
class YoloV1Decoder(_GridDecoder):
    """Darknet ``[detection]``: a side x side grid, ``num`` boxes per cell, one class vector per cell.

    Flat layout per image: class probabilities (side², classes), confidences (side², num), boxes
    (side², num, coords) as cell-relative centre and image-relative width/height (squared if sqrt).
    """

    side: int = 7
    num: int = 2
    classes: int = 20
    coords: int = 4
    sqrt: bool = True
    softmax: bool = False
    kind: ClassVar[str] = "detection"

    def candidates(self, raw: np.ndarray, score_threshold: float) -> tuple[np.ndarray, np.ndarray]:
        cells = self.side * self.side
        expected = cells * (self.classes + self.num * (1 + self.coords))
        flat = raw.reshape(-1).astype(np.float64)  # raw confidences and probabilities: no bound to prune by
        if flat.size != expected:
            raise ValueError(f"detection output must have {expected} values per image, got {flat.size}")
        probs = flat[: cells * self.classes].reshape(cells, self.classes)
        if self.softmax:
            probs = _softmax(probs, axis=1)
        confidence = flat[cells * self.classes : cells * (self.classes + self.num)].reshape(cells, self.num)
        box = flat[cells * (self.classes + self.num) :].reshape(cells, self.num, self.coords)
        row, col = np.divmod(np.arange(cells), self.side)
        width, height = self.input_size
        power = 2 if self.sqrt else 1
        cx = (box[..., 0] + col[:, None]) / self.side * width
        cy = (box[..., 1] + row[:, None]) / self.side * height
        w = box[..., 2] ** power * width
        h = box[..., 3] ** power * height
        scores = confidence[:, :, None] * probs[:, None, :]
        return _corners(cx, cy, w, h), scores.reshape(-1, self.classes)


@dataclass(frozen=True)
class RegionDecoder(_GridDecoder):
    """Darknet ``[region]`` (YOLOv2): ``anchors`` are (w, h) pairs in grid cells; logistic x, y and
    objectness; softmax over classes. Channels per anchor: tx, ty, tw, th, objectness, classes."""

    anchors: tuple[float, ...] = ()
    num: int = 5
    classes: int = 20
    coords: int = 4
    softmax: bool = True
    kind: ClassVar[str] = "region"

    def candidates(self, raw: np.ndarray, score_threshold: float) -> tuple[np.ndarray, np.ndarray]:
        per_anchor = self.coords + 1 + self.classes
        grid_h, grid_w = self._check_channels(raw, per_anchor, self.num)
        # (H, W, num, channels): Darknet orders detections by location, then anchor.
        t = raw.reshape(self.num, per_anchor, grid_h, grid_w).transpose(2, 3, 0, 1)
        objectness = _sigmoid(t[..., self.coords].astype(np.float64))
        # A softmax is at most 1, so a score (objectness x probability) is at most its objectness.
        rows, cols, anchor = np.nonzero(
            objectness > score_threshold if self.softmax else objectness == objectness
        )
        picked = t[rows, cols, anchor].astype(np.float64)
        anchors = np.asarray(self.anchors, np.float64).reshape(self.num, 2)[anchor]
        width, height = self.input_size
        cx = (cols + _sigmoid(picked[:, 0])) / grid_w * width
        cy = (rows + _sigmoid(picked[:, 1])) / grid_h * height
        w = np.exp(picked[:, 2]) * anchors[:, 0] / grid_w * width
        h = np.exp(picked[:, 3]) * anchors[:, 1] / grid_h * height
        class_logits = picked[:, self.coords + 1 :]
        probs = _softmax(class_logits, axis=-1) if self.softmax else class_logits
        scores = objectness[rows, cols, anchor][:, None] * probs
        return _corners(cx, cy, w, h), scores


@dataclass(frozen=True)
class YoloV3Decoder(_GridDecoder):
    """Darknet ``[yolo]`` (YOLOv3): ``anchors`` are (w, h) pairs in input pixels, ``mask`` picks
    this output's anchors; logistic x, y, objectness and classes. ``scale_x_y`` as in YOLOv4."""

    anchors: tuple[float, ...] = ()
    mask: tuple[int, ...] = ()
    classes: int = 80
    scale_x_y: float = 1.0
    kind: ClassVar[str] = "yolo"

    def candidates(self, raw: np.ndarray, score_threshold: float) -> tuple[np.ndarray, np.ndarray]:
        per_anchor = 5 + self.classes
        grid_h, grid_w = self._check_channels(raw, per_anchor, len(self.mask))
        t = raw.reshape(len(self.mask), per_anchor, grid_h, grid_w).transpose(2, 3, 0, 1)
        objectness = _sigmoid(t[..., 4].astype(np.float64))
        # A logistic class probability is at most 1: only boxes whose objectness passes can score.
        rows, cols, anchor = np.nonzero(objectness > score_threshold)
        picked = t[rows, cols, anchor].astype(np.float64)
        anchors = np.asarray(self.anchors, np.float64).reshape(-1, 2)[list(self.mask)][anchor]
        width, height = self.input_size
        shift = (self.scale_x_y - 1.0) / 2
        cx = (cols + _sigmoid(picked[:, 0]) * self.scale_x_y - shift) / grid_w * width
        cy = (rows + _sigmoid(picked[:, 1]) * self.scale_x_y - shift) / grid_h * height
        w = np.exp(picked[:, 2]) * anchors[:, 0]
        h = np.exp(picked[:, 3]) * anchors[:, 1]
        scores = objectness[rows, cols, anchor][:, None] * _sigmoid(picked[:, 5:])
        return _corners(cx, cy, w, h), scores


Decoder = Union[YoloV1Decoder, RegionDecoder, YoloV3Decoder]
_DECODERS: dict[str, type[Decoder]] = {cls.kind: cls for cls in (YoloV1Decoder, RegionDecoder, YoloV3Decoder)}


def decoder_from_metadata(text: str) -> Decoder:
    """Rebuild a decoder from the JSON that :meth:`_GridDecoder.to_metadata` wrote."""
    try:
        record = json.loads(text)
        cls = _DECODERS[record["type"]]
        fields: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in record["decoder"].items()
        }
        return cls(**fields)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a YOLO decoder description: {exc}") from None


def decoders_from_metadata(metadata: Mapping[str, str]) -> dict[str, Decoder]:
    """Decoders of a loaded model, by raw output name: pass ``model.graph.metadata``."""
    return {
        key[len(METADATA_PREFIX) :]: decoder_from_metadata(value)
        for key, value in metadata.items()
        if key.startswith(METADATA_PREFIX)
    }


def decode(
    decoders: Mapping[str, Decoder],
    outputs: Mapping[str, np.ndarray],
    score_threshold: float = 0.25,
    iou_threshold: float = 0.45,
) -> list[Detections]:
    """Decode every raw output, merge them per image and apply class-wise NMS."""
    if not decoders:
        raise ValueError("no YOLO decoders given (the model has no detection layers?)")
    per_output = [decoders[name](outputs[name], score_threshold) for name in decoders]
    return [class_nms(Detections.concatenate(parts), iou_threshold) for parts in zip(*per_output)]


def undo_letterbox(boxes: np.ndarray, image_size: tuple[int, int], input_size: tuple[int, int]) -> np.ndarray:
    """Map boxes from a letterboxed network input (image scaled to fit, centred, aspect kept)
    back to pixels of the original ``image_size`` (width, height)."""
    image = np.asarray(image_size, np.float64)
    net = np.asarray(input_size, np.float64)
    scale = float(np.min(net / image))
    offset = (net - image * scale) / 2
    result = (np.asarray(boxes, np.float64).reshape(-1, 2, 2) - offset) / scale
    return result.reshape(-1, 4).astype(np.float32)
