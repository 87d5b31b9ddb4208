"""Detection heads: which decoder reads a model's raw outputs, found from the model or ``--head``.

Formats read (boxes in network-input pixels, before NMS):

* Darknet ``[detection]`` / ``[region]`` / ``[yolo]`` layers: edgecnn's Darknet importer describes
  them in ``Graph.metadata`` (:func:`edgecnn.detection.yolo.decoders_from_metadata`), and so does an
  ONNX or .ecnn file converted from such a model.
* ``yolov8`` (Ultralytics YOLOv8/v9/v10-style exports, anchor-free): one ``[batch, 4 + classes, N]``
  tensor; rows cx, cy, w, h in input pixels, then one score per class, already sigmoided (no
  objectness).
* ``yolov5`` (YOLOv5/v7 exports): one ``[batch, N, 5 + classes]`` tensor; cx, cy, w, h in input
  pixels, objectness, then class probabilities, all already sigmoided; score = objectness x class.
* ``yolov3`` / ``yolov2`` raw heads in an ONNX file without metadata: the grids of the
  ``[yolo]`` / ``[region]`` layers before their activations, decoded with Darknet's formulas; the
  anchors default to Darknet's COCO ones (``yolov3:10,13,16,30,...`` names others).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from edgecnn.detection.nms import Detections
from edgecnn.detection.yolo import Decoder, RegionDecoder, YoloV3Decoder, decoders_from_metadata
from edgecnn.errors import InputError, ModelFormatError
from edgecnn.ir.graph import TensorSpec

HEAD_KINDS = ("darknet", "yolov8", "yolov5", "yolov3", "yolov2")
YOLOV3_ANCHORS = (10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119, 116, 90, 156, 198, 373, 326)
YOLOV3_TINY_ANCHORS = (10, 14, 23, 27, 37, 58, 81, 82, 135, 169, 344, 319)
YOLOV2_ANCHORS = (0.57273, 0.677385, 1.87446, 2.06253, 3.33843, 5.47434, 7.88282, 3.52778, 9.77052, 9.16828)


class Head(Protocol):
    """Raw outputs of a batch -> one :class:`Detections` per image, in network-input pixels."""

    @property
    def kind(self) -> str: ...

    @property
    def classes(self) -> int: ...

    def decode(self, outputs: Mapping[str, np.ndarray], score_threshold: float) -> list[Detections]: ...


@dataclass(frozen=True)
class GridHead:
    """Darknet-style grid decoders (v1/v2/v3), one per raw output."""

    decoders: Mapping[str, Decoder]
    kind: str

    @property
    def classes(self) -> int:
        return max(d.classes for d in self.decoders.values())

    @property
    def letterboxed(self) -> bool:
        """Darknet letterboxes the input of ``[yolo]`` (v3) heads and stretches it for v1/v2."""
        return all(isinstance(d, YoloV3Decoder) for d in self.decoders.values())

    def decode(self, outputs: Mapping[str, np.ndarray], score_threshold: float) -> list[Detections]:
        per_output = [decoder(outputs[name], score_threshold) for name, decoder in self.decoders.items()]
        return [Detections.concatenate(parts) for parts in zip(*per_output)]


@dataclass(frozen=True)
class AnchorFreeHead:
    """One tensor of boxes and scores: ``[batch, 4 + classes, N]`` (yolov8) or ``[batch, N, 5 +
    classes]`` (yolov5); see the module docstring."""

    output: str
    objectness: bool  # True for yolov5: row 4 is the objectness, class scores follow
    classes: int
    kind: str

    def decode(self, outputs: Mapping[str, np.ndarray], score_threshold: float) -> list[Detections]:
        raw = np.asarray(outputs[self.output], np.float32)
        rows = 4 + int(self.objectness) + self.classes
        if self.objectness:
            raw = raw.transpose(0, 2, 1)  # yolov5: [batch, N, rows] -> [batch, rows, N]
        if raw.ndim != 3 or raw.shape[1] != rows:
            layout = f"[batch, N, {rows}]" if self.objectness else f"[batch, {rows}, N]"
            raise ModelFormatError(f"{self.kind} output {self.output} should be {layout}, got {raw.shape}")
        results = []
        for image in raw:
            cx, cy, w, h = image[:4]
            scores = image[5:] * image[4] if self.objectness else image[4:]
            boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
            candidate, label = np.nonzero(score_threshold < scores.T)
            results.append(Detections(boxes[candidate], scores[label, candidate], label.astype(np.int64)))
        return results


def _shape(spec: TensorSpec) -> str:
    dims = "?" if spec.shape is None else ", ".join(str(d) for d in spec.shape)
    return f"{spec.name} {spec.dtype}[{dims}]"


def not_a_head(outputs: Sequence[TensorSpec], reason: str = "") -> ModelFormatError:
    """The error for a model whose outputs no head kind reads."""
    found = "; ".join(_shape(s) for s in outputs)
    why = f" ({reason})" if reason else ""
    return ModelFormatError(
        f"the model's outputs are not a detection head{why}: found {found}; expected Darknet "
        f"detection layers, one [batch, 4+classes, N] (yolov8) or [batch, N, 5+classes] (yolov5) "
        f"tensor, or raw YOLO grids named with --head yolov3|yolov2"
    )


def parse_head(text: str) -> tuple[str, tuple[float, ...]]:
    """``"yolov3:10,13,16,30"`` -> ("yolov3", anchors); ``"yolov8"`` -> ("yolov8", ())."""
    kind, _, anchors = text.partition(":")
    kind = kind.strip().lower()
    if kind not in HEAD_KINDS:
        raise InputError(f"--head must be one of {', '.join(HEAD_KINDS)}, got {text!r}")
    try:
        values = tuple(float(a) for a in anchors.split(",")) if anchors else ()
    except ValueError:
        raise InputError(f"--head anchors must be comma-separated numbers, got {anchors!r}") from None
    if len(values) % 2:
        raise InputError(f"--head anchors come in (w, h) pairs, got {len(values)} numbers")
    return kind, values


def _dims(spec: TensorSpec, rank: int) -> tuple[int, ...] | None:
    if spec.shape is None or len(spec.shape) != rank:
        return None
    return tuple(d if isinstance(d, int) else -1 for d in spec.shape)


def _anchor_free(outputs: Sequence[TensorSpec], kind: str) -> AnchorFreeHead:
    dims = _dims(outputs[0], 3) if len(outputs) == 1 else None
    if dims is None or min(dims[1:]) < 1:
        raise not_a_head(outputs, f"{kind} needs one 3-D output with fixed sizes")
    rows = dims[2] if kind == "yolov5" else dims[1]
    extra = 5 if kind == "yolov5" else 4
    if rows <= extra:
        raise not_a_head(outputs, f"{kind} needs more than {extra} values per box")
    return AnchorFreeHead(outputs[0].name, kind == "yolov5", rows - extra, kind)


def _raw_grids(
    outputs: Sequence[TensorSpec], kind: str, anchors: tuple[float, ...], input_size: tuple[int, int]
) -> GridHead:
    grids: list[tuple[str, tuple[int, ...]]] = []
    for spec in outputs:
        dims = _dims(spec, 4)
        if dims is None or min(dims[1:]) < 1:
            raise not_a_head(outputs, f"{kind} needs [batch, channels, H, W] outputs with fixed sizes")
        grids.append((spec.name, dims))
    grids.sort(key=lambda grid: grid[1][2])  # coarsest first: Darknet gives it the last anchors
    if kind == "yolov2":
        anchors = anchors or YOLOV2_ANCHORS
        per_output = len(anchors) // 2
    else:
        anchors = anchors or (YOLOV3_TINY_ANCHORS if len(grids) == 2 else YOLOV3_ANCHORS)
        per_output = len(anchors) // 2 // len(grids)
    decoders: dict[str, Decoder] = {}
    for position, (name, dims) in enumerate(grids):
        classes, remainder = divmod(dims[1], max(per_output, 1))
        if per_output < 1 or remainder or classes < 6:
            raise not_a_head(outputs, f"{name} has {dims[1]} channels, not {per_output} x (5 + classes)")
        if kind == "yolov2":
            decoders[name] = RegionDecoder(input_size, anchors, per_output, classes - 5)
        else:
            first = (len(grids) - 1 - position) * per_output
            mask = tuple(range(first, first + per_output))
            decoders[name] = YoloV3Decoder(input_size, anchors, mask, classes - 5)
    return GridHead(decoders, kind)


def find_head(
    metadata: Mapping[str, str], outputs: Sequence[TensorSpec], input_size: tuple[int, int], head: str | None
) -> Head:
    """The head named by ``head`` (see :func:`parse_head`), else the one the model describes or whose
    output shape is unambiguous; a :class:`ModelFormatError` saying what was found otherwise."""
    kind, anchors = parse_head(head) if head else ("", ())
    described = decoders_from_metadata(metadata)
    if kind in ("", "darknet") and described:
        return GridHead(described, "darknet")
    if kind == "darknet":
        raise not_a_head(outputs, "the model has no Darknet detection layer descriptions")
    if kind in ("yolov3", "yolov2"):
        return _raw_grids(outputs, kind, anchors, input_size)
    if kind:
        return _anchor_free(outputs, kind)
    dims = _dims(outputs[0], 3) if len(outputs) == 1 else None
    if dims is None or min(dims[1:]) < 5:
        raise not_a_head(outputs)
    # Exports have thousands of candidate boxes and fewer values per box: the short axis is the box's.
    return _anchor_free(outputs, "yolov8" if dims[1] < dims[2] else "yolov5")


def labels_from_metadata(metadata: Mapping[str, str]) -> list[str]:
    """Class names an exporter stored: Ultralytics' ``names`` (``{0: 'person', ...}``), or a
    ``labels`` entry with one name per line."""
    if "labels" in metadata:
        return [line.strip() for line in metadata["labels"].splitlines() if line.strip()]
    try:
        names = ast.literal_eval(metadata.get("names", ""))
    except (ValueError, SyntaxError):
        return []
    if isinstance(names, dict):
        return [str(names[i]) for i in sorted(names) if isinstance(i, int)]
    if isinstance(names, list):
        return [str(n) for n in names]
    return []
