"""Object detection on PIL images: the model's pre-processing, its head's decoder, NMS, and boxes
mapped back to the source image's pixels.

Pre-processing follows how each family was trained and released:

* Darknet models: RGB scaled to [0, 1]. YOLOv3 ``[yolo]`` heads are letterboxed (aspect kept, borders
  filled with 0.5), as pjreddie's ``test_detector`` does since YOLOv3 (``letterbox_image``); v1
  ``[detection]`` and v2 ``[region]`` heads are stretched to the input size, as their releases'
  ``resize_image`` did (and as OpenCV's dnn samples feed every Darknet model).
* Ultralytics-style ONNX exports (``yolov8``, ``yolov5`` heads): RGB scaled to [0, 1], letterboxed
  with grey 114 borders, as their ``LetterBox`` transform.

``resize="letterbox"`` or ``"stretch"`` overrides the choice (e.g. AlexeyAB's darknet stretches
v3 models too).

Images are resized with Pillow's bilinear filter; video frames with FFmpeg's (swscale, bilinear)
straight from the decoder's YUV planes, which skips a full-size RGB conversion and a second pass
(the two filters differ by a few levels per pixel, mostly at sharp colour edges where the video's
chroma is subsampled).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgecnn.detection.nms import Detections, class_nms
from edgecnn.errors import InputError, ModelFormatError
from edgecnn.vision.heads import GridHead, Head, find_head, labels_from_metadata
from edgecnn.vision.labels import default_labels
from edgecnn.vision.sources import Frame, VideoPicture

if TYPE_CHECKING:
    from PIL import Image

    from edgecnn.model import Model

RESIZE_MODES = ("letterbox", "stretch")


@dataclass(frozen=True)
class Detection:
    """One detected object; ``box`` is x1, y1, x2, y2 in the source image's pixels."""

    box: tuple[float, float, float, float]
    score: float
    class_id: int
    label: str


@dataclass(frozen=True)
class InputFormat:
    """How an image becomes the network's input tensor (NCHW float32)."""

    size: tuple[int, int]  # network input (width, height)
    letterbox: bool  # keep the aspect ratio and pad (True) or stretch to size (False)
    channel_order: str = "rgb"
    scale: float = 1 / 255
    fill: float = 127.5  # letterbox border, in 0..255 pixel units

    def tensor(self, image: Image.Image | VideoPicture) -> tuple[np.ndarray, Placement]:
        """[3, H, W] float32 input and where the image (or video frame) landed in it.

        The resized 8-bit pixels are scaled straight into their window of the output, one plane at
        a time, and only the border is filled: one pass over the input instead of four."""
        image_size = image.size
        width, height = self.size
        if self.letterbox:
            ratio = min(width / image_size[0], height / image_size[1])
            inner = (max(1, round(image_size[0] * ratio)), max(1, round(image_size[1] * ratio)))
        else:
            inner = (width, height)
        left, top = (width - inner[0]) // 2, (height - inner[1]) // 2
        pixels = resized_rgb(image, inner)
        scale = np.float32(self.scale)
        x = np.empty((3, height, width), np.float32)
        border = np.float32(self.fill) * scale
        x[:, :top] = border
        x[:, top + inner[1] :] = border
        x[:, top : top + inner[1], :left] = border
        x[:, top : top + inner[1], left + inner[0] :] = border
        channels = (2, 1, 0) if self.channel_order == "bgr" else (0, 1, 2)
        for plane, channel in enumerate(channels):
            window = x[plane, top : top + inner[1], left : left + inner[0]]
            np.multiply(pixels[:, :, channel], scale, out=window, dtype=np.float32)
        scales = (inner[0] / image_size[0], inner[1] / image_size[1])
        return x, Placement((left, top), scales, image_size)


def resized_rgb(image: Image.Image | VideoPicture, size: tuple[int, int]) -> np.ndarray:
    """[height, width, 3] 8-bit RGB pixels of ``image`` resized (bilinear) to ``size`` (width, height)."""
    from PIL import Image

    if isinstance(image, VideoPicture):
        return image.rgb(size)
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    return np.asarray(rgb.resize(size, Image.Resampling.BILINEAR))


@dataclass(frozen=True)
class Placement:
    """Where a source image sits in the network input: pixel offset, per-axis scale, source size."""

    offset: tuple[float, float]
    scale: tuple[float, float]
    image_size: tuple[int, int]

    def to_image(self, boxes: np.ndarray) -> np.ndarray:
        """Boxes in network-input pixels -> boxes in source pixels (not clipped: NMS sees the
        boxes as the network drew them, as Darknet's does)."""
        corners = (np.asarray(boxes, np.float64).reshape(-1, 2, 2) - self.offset) / self.scale
        return corners.reshape(-1, 4)

    def clip(self, boxes: np.ndarray) -> np.ndarray:
        """Boxes cut to the image's bounds."""
        return np.clip(boxes.reshape(-1, 2, 2), 0, self.image_size).reshape(-1, 4)


class Prepared:
    """An image turned into a detector's input, ready for :meth:`Detector.infer`; each detector
    has its own kind."""


class Inferred:
    """One image's network outputs, ready for :meth:`Detector.finish`; each detector has its own kind."""


@dataclass(frozen=True)
class NetworkInput(Prepared):
    """A YOLO input: the [1, 3, H, W] tensor and where the image sits in it."""

    tensor: np.ndarray
    placement: Placement


@dataclass(frozen=True)
class NetworkOutput(Inferred):
    """A YOLO image's raw head outputs (batch of one) and where the image sat in the input."""

    outputs: dict[str, np.ndarray]
    placement: Placement


def to_detections(found: Detections, labels: Sequence[str]) -> list[Detection]:
    """NMS-ed arrays (already in source pixels) -> :class:`Detection` records, best first."""
    return [
        Detection(
            (float(x1), float(y1), float(x2), float(y2)),
            float(score),
            int(label),
            labels[label] if label < len(labels) else str(label),
        )
        for (x1, y1, x2, y2), score, label in zip(found.boxes, found.scores, found.classes)
    ]


def read_labels_file(path: str | Path) -> list[str]:
    """One class name per line."""
    try:
        return [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read labels file {path}: {exc}") from None


class Detector(abc.ABC):
    """A model that finds objects in images. Build one with :meth:`load` or :meth:`faces`."""

    description: str
    score_threshold: float
    iou_threshold: float
    net: Model

    @property
    def threads(self) -> int:
        """The threads the detector's model runs on (its RuntimeOptions)."""
        return self.net.options.threads

    @classmethod
    def load(
        cls,
        model: str | Path,
        *,
        weights: str | None = None,
        head: str | None = None,
        labels: str | None = None,
        score_threshold: float = 0.25,
        iou_threshold: float = 0.45,
        threads: int | None = None,
        resize: str | None = None,
    ) -> Detector:
        """A YOLO detector from a Darknet cfg (+ weights), an ONNX export or an .ecnn file."""
        from edgecnn.api import load

        net = load(model, weights, threads=threads)
        return YoloDetector(
            net,
            head=head,
            labels=read_labels_file(labels) if labels else None,
            score_threshold=score_threshold,
            iou_threshold=iou_threshold,
            resize=resize,
            name=Path(model).name,
        )

    @classmethod
    def faces(cls, **options: Any) -> Detector:
        """The bundled SimpleCNN face classifier scanned over an image pyramid; ``options`` as
        :class:`edgecnn.vision.faces.FaceDetector` (scales, stride, score_threshold, ...)."""
        from edgecnn.vision.faces import FaceDetector

        return FaceDetector.bundled(**options)

    @abc.abstractmethod
    def prepare(self, image: Image.Image) -> Prepared:
        """Pre-processing only (safe to run in another thread than the inference)."""

    def prepare_frame(self, frame: Frame) -> Prepared:
        """:meth:`prepare` for a decoded frame; a detector that reads a video frame's own pixels
        overrides it to skip the full-size RGB image."""
        return self.prepare(frame.image)

    @abc.abstractmethod
    def infer(self, prepared: Sequence[Prepared], threads: int | None = None) -> list[Inferred]:
        """The network's part, one result per image (batched where the model allows), on at most
        ``threads`` threads (None: the model's own)."""

    @abc.abstractmethod
    def finish(self, inferred: Inferred) -> list[Detection]:
        """Decoding and NMS: plain numpy, so it can overlap the next image's inference in another thread."""

    def detect_prepared(self, prepared: Sequence[Prepared]) -> list[list[Detection]]:
        """Inference, decoding and NMS for images already prepared."""
        return [self.finish(inferred) for inferred in self.infer(prepared)]

    def detect(self, image: Image.Image) -> list[Detection]:
        """Objects in one image, best score first."""
        return self.detect_many([image])[0]

    def detect_many(self, images: Sequence[Image.Image]) -> list[list[Detection]]:
        """Objects in each image (batched through the model where it takes batches)."""
        return self.detect_prepared([self.prepare(image) for image in images])


def check_thresholds(score_threshold: float, iou_threshold: float) -> None:
    if not 0.0 <= score_threshold <= 1.0:
        raise InputError(f"score threshold must be in [0, 1], got {score_threshold}")
    if not 0.0 <= iou_threshold <= 1.0:
        raise InputError(f"IoU threshold must be in [0, 1], got {iou_threshold}")


class YoloDetector(Detector):
    """A YOLO-family model: one forward pass per image, decoded by its :class:`Head`."""

    def __init__(
        self,
        net: Model,
        *,
        head: str | None = None,
        labels: Sequence[str] | None = None,
        score_threshold: float = 0.25,
        iou_threshold: float = 0.45,
        resize: str | None = None,
        name: str = "model",
    ) -> None:
        check_thresholds(score_threshold, iou_threshold)
        if resize is not None and resize not in RESIZE_MODES:
            raise InputError(f"resize must be one of {', '.join(RESIZE_MODES)}, got {resize!r}")
        if len(net.inputs) != 1:
            raise ModelFormatError(
                f"{name}: a detector takes one image input, this model has {len(net.inputs)}"
            )
        self.net = net
        metadata = net.graph.metadata
        spec = net.inputs[0]
        dims = spec.shape if spec.shape is not None and len(spec.shape) == 4 else None
        if dims is None or dims[1] != 3:
            raise ModelFormatError(f"{name}: a detector needs a [batch, 3, H, W] input, got {spec.shape}")
        if not (isinstance(dims[2], int) and isinstance(dims[3], int)):
            raise ModelFormatError(f"{name}: the input's height and width must be fixed, got {spec.shape}")
        self.head: Head = find_head(metadata, net.outputs, (dims[3], dims[2]), head)
        self.batched = not isinstance(dims[0], int)
        if resize is None:
            letterbox = self.head.letterboxed if isinstance(self.head, GridHead) else True
        else:
            letterbox = resize == "letterbox"
        fill = 127.5 if isinstance(self.head, GridHead) else 114.0
        self.input_format = InputFormat((dims[3], dims[2]), letterbox, fill=fill)
        self.labels = list(labels or labels_from_metadata(metadata) or default_labels(self.head.classes))
        self.score_threshold = score_threshold
        self.iou_threshold = iou_threshold
        self.description = (
            f"{name}: {self.head.kind} head, {self.head.classes} classes, input {dims[3]}x{dims[2]} "
            f"{'letterboxed' if letterbox else 'stretched'}"
        )

    def prepare(self, image: Image.Image | VideoPicture) -> Prepared:
        tensor, placement = self.input_format.tensor(image)
        return NetworkInput(tensor[None], placement)

    def prepare_frame(self, frame: Frame) -> Prepared:
        return self.prepare(frame.picture)

    def infer(self, prepared: Sequence[Prepared], threads: int | None = None) -> list[Inferred]:
        inputs = [p for p in prepared if isinstance(p, NetworkInput)]
        if len(inputs) != len(prepared):
            raise InputError("YoloDetector.infer takes what its own prepare() returned")
        groups = [inputs] if self.batched and inputs else [[p] for p in inputs]
        results: list[Inferred] = []
        for group in groups:
            # one image needs no copy: concatenating writes its whole tensor again on inference's thread
            tensor = group[0].tensor if len(group) == 1 else np.concatenate([p.tensor for p in group])
            outputs = self.net.run({self.net.inputs[0].name: tensor}, threads=threads)
            results.extend(
                NetworkOutput({name: value[k : k + 1] for name, value in outputs.items()}, item.placement)
                for k, item in enumerate(group)
            )
        return results

    def finish(self, inferred: Inferred) -> list[Detection]:
        if not isinstance(inferred, NetworkOutput):
            raise InputError("YoloDetector.finish takes what its own infer() returned")
        found = self.head.decode(inferred.outputs, self.score_threshold)[0]
        placement = inferred.placement
        mapped = Detections(placement.to_image(found.boxes).astype(np.float32), found.scores, found.classes)
        kept = class_nms(mapped, self.iou_threshold)
        clipped = Detections(placement.clip(kept.boxes).astype(np.float32), kept.scores, kept.classes)
        return to_detections(clipped, self.labels)
