"""What a worker does with each item: pre-processing, then one of three heads, into result columns.

* ``classify``: the first output's top-k classes, scores (after an optional softmax) and labels;
* ``detect``: boxes, scores, classes and labels through the YOLO heads of ``edgecnn detect``
  (edgecnn.vision.detector), in source-image pixels after NMS;
* ``raw``: every output tensor, flattened, with its shape.

Pre-processing is ``edgecnn run``'s (edgecnn.vision.preprocess), with a letterbox option as
``edgecnn detect`` pads (the detection head chooses its own). An item that cannot be read or has
the wrong shape becomes a row with an ``error``; items of one shape run as one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgecnn.batch.items import Item, read_array
from edgecnn.errors import EdgeCNNError, InputError
from edgecnn.limits import MemoryBudget
from edgecnn.model import Model
from edgecnn.ops.activation import SoftmaxAttrs, softmax
from edgecnn.vision.detector import InputFormat, NetworkInput, YoloDetector
from edgecnn.vision.faces import batched_model
from edgecnn.vision.preprocess import Preprocess, open_image

TASKS = ("classify", "detect", "raw")
IDENTITY_COLUMNS = {"index": "int64", "path": "string", "row": "int64", "error": "string"}
"""Columns every row has: the item's identity and, for an input that failed, why (else null)."""


@dataclass(frozen=True)
class TaskSpec:
    """A job's task, pre-processing and head options (sent to every worker)."""

    kind: str = "classify"
    preprocess: Preprocess = field(default_factory=Preprocess)
    letterbox: bool = False  # keep the aspect ratio and pad (classify, raw)
    fill: float = 114.0  # letterbox border in 0..255 pixel units
    top: int = 5
    apply_softmax: bool = False
    labels: tuple[str, ...] = ()
    head: str | None = None  # detect: see edgecnn.vision.heads.parse_head
    score_threshold: float = 0.25
    iou_threshold: float = 0.45

    def __post_init__(self) -> None:
        if self.kind not in TASKS:
            raise InputError(f"task must be one of {', '.join(TASKS)}, got {self.kind!r}")
        if self.top < 1:
            raise InputError(f"top must be at least 1, got {self.top}")
        if self.letterbox and (self.preprocess.size is None or self.preprocess.grayscale):
            raise InputError("--letterbox needs a fixed input size and an RGB/BGR model")


def columns(spec: TaskSpec, net: Model) -> dict[str, str]:
    """Every output column of the job, by name, with its kind (see shards.ARROW_KINDS)."""
    if spec.kind == "classify":
        task = {"top_class": "int64_list", "top_score": "float32_list", "top_label": "string_list"}
    elif spec.kind == "detect":
        task = {
            "boxes": "float32_list_list",
            "scores": "float32_list",
            "classes": "int64_list",
            "labels": "string_list",
        }
    else:
        task = {}
        for output in net.outputs:
            task[output.name] = "float32_list"
            task[f"{output.name}_shape"] = "int64_list"
    clash = set(task) & set(IDENTITY_COLUMNS)
    if clash:
        raise InputError(f"model output name(s) {', '.join(sorted(clash))} clash with batch's own columns")
    return {**IDENTITY_COLUMNS, **task}


def identity(item: Item) -> dict[str, Any]:
    return {"index": item.index, "path": item.path, "row": item.row, "error": None}


def failed_row(item: Item, message: str) -> dict[str, Any]:
    """The row of an item that produced no result."""
    return {**identity(item), "error": message}


@dataclass
class Prepared:
    """An item ready for the model: its tensor (no batch axis) or why it is not."""

    item: Item
    tensor: np.ndarray | None = None
    detector_input: NetworkInput | None = None
    error: str | None = None


class Runner:
    """One worker's model and task: ``prepare`` runs in the decoding thread, ``infer`` in the
    inference one."""

    def __init__(self, net: Model, spec: TaskSpec, batch_size: int) -> None:
        self.spec = spec
        shape = net.inputs[0].shape if len(net.inputs) == 1 else None
        if shape is None or not shape:
            raise InputError(f"batch runs one-input models with a known rank; this one has {net.inputs}")
        if batch_size > 1 and shape[0] == 1:
            net = batched_model(net)  # a file that fixes batch 1 still runs per-sample layers
        self.net = net
        self.batch_size = batch_size
        self.input_name = net.inputs[0].name
        self.sample_shape = tuple(net.inputs[0].shape or ())[1:]
        self.batched = not isinstance((net.inputs[0].shape or (1,))[0], int)
        self.detector = (
            YoloDetector(
                net,
                head=spec.head,
                labels=spec.labels or None,
                score_threshold=spec.score_threshold,
                iou_threshold=spec.iou_threshold,
            )
            if spec.kind == "detect"
            else None
        )
        self._files: dict[str, Any] = {}
        self.budget = MemoryBudget.default()  # once, not a /proc read per image

    # ------------------------------------------------------------ prepare
    def prepare(self, item: Item) -> Prepared:
        """Decode and pre-process one item; failures become the item's error."""
        try:
            if self.detector is not None:
                if item.kind != "image":
                    raise InputError(f"{item.path}: detection reads images, not arrays")
                prepared = self.detector.prepare(load_image(item.path))
                assert isinstance(prepared, NetworkInput)
                return Prepared(item, detector_input=prepared)
            tensor = self._image(item.path) if item.kind == "image" else read_array(item, self._files)
            return Prepared(item, tensor=self._checked(item, tensor))
        except EdgeCNNError as exc:
            return Prepared(item, error=str(exc))

    def _image(self, path: str) -> np.ndarray:
        pre = self.spec.preprocess
        if not self.spec.letterbox:
            return pre.image(path, self.budget)[0]
        assert pre.size is not None
        height, width = pre.size
        box = InputFormat((width, height), True, pre.channel_order, scale=1.0, fill=self.spec.fill)
        chw, _ = box.tensor(load_image(path))
        return pre.normalize(chw.transpose(1, 2, 0))

    def _checked(self, item: Item, tensor: np.ndarray) -> np.ndarray:
        where = item.path if item.row is None else f"{item.path} row {item.row}"
        expected = self.sample_shape
        fixed = all(isinstance(d, int) for d in expected)
        if tensor.ndim != len(expected) or (
            fixed and tuple(tensor.shape) != expected
        ):  # symbolic dimensions are checked by the model
            raise InputError(
                f"{where}: sample shape {list(tensor.shape)}, the model expects {list(expected)}"
            )
        return tensor.astype(np.float32, copy=False)

    # -------------------------------------------------------------- infer
    def infer(self, batch: Sequence[Prepared]) -> list[dict[str, Any]]:
        """One row per prepared item, in order: results, or the item's error."""
        rows: dict[int, dict[str, Any]] = {}
        ready = []
        for p in batch:
            if p.error is not None:
                rows[p.item.index] = failed_row(p.item, p.error)
            else:
                ready.append(p)
        groups: dict[tuple[int, ...], list[Prepared]] = {}
        for p in ready:
            key = p.tensor.shape if p.tensor is not None else ()
            groups.setdefault(tuple(key), []).append(p)
        for group in groups.values():
            for p, row in zip(group, self._run_group(group)):
                rows[p.item.index] = row
        return [rows[p.item.index] for p in batch]

    def _run_group(self, group: list[Prepared]) -> list[dict[str, Any]]:
        """Rows of items of one shape, in runs of at most the batch size (see ``_run_size``), or one
        at a time to find which items fail."""
        if not self.batched:
            return self._run_each(group)
        size = self._run_size(len(group))
        try:
            head = self._results(group[:size])
        except EdgeCNNError:
            head = self._run_each(group[:size])  # some item fails: only it reports the error
        return head + (self._run_group(group[size:]) if size < len(group) else [])

    def _run_size(self, count: int) -> int:
        """How many of ``count`` items run at once: up to the batch size for tensors (padded to it by
        ``_batch``), the largest power of two for detection (a plan per size, log2(batch size) + 1
        of them at most)."""
        if self.detector is None:
            return min(count, self.batch_size)
        return 1 << (count.bit_length() - 1)

    def _run_each(self, group: list[Prepared]) -> list[dict[str, Any]]:
        rows = []
        for p in group:
            try:
                rows.extend(self._results([p]))
            except EdgeCNNError as exc:
                rows.append(failed_row(p.item, str(exc)))
        return rows

    def _batch(self, tensors: list[np.ndarray]) -> np.ndarray:
        """The model's input for ``tensors``, padded with zeros to the batch size: every run then uses
        the one plan of that size, and an item's result does not depend on how many items came with
        it (plans for other sizes choose kernels that round differently)."""
        rows = max(self.batch_size, len(tensors)) if self.batched else len(tensors)
        x = np.empty((rows, *tensors[0].shape), np.float32)
        for i, tensor in enumerate(tensors):
            x[i] = tensor
        x[len(tensors) :] = 0.0
        return x

    def _results(self, group: list[Prepared]) -> list[dict[str, Any]]:
        if self.detector is not None:
            found = self.detector.detect_prepared([p.detector_input for p in group if p.detector_input])
            return [
                {
                    **identity(p.item),
                    "boxes": [list(d.box) for d in dets],
                    "scores": [d.score for d in dets],
                    "classes": [d.class_id for d in dets],
                    "labels": [d.label for d in dets],
                }
                for p, dets in zip(group, found)
            ]
        x = self._batch([p.tensor for p in group if p.tensor is not None])
        outputs = {name: value[: len(group)] for name, value in self.net.run({self.input_name: x}).items()}
        if self.spec.kind == "raw":
            return [
                {
                    **identity(p.item),
                    **{name: value[i].reshape(-1).tolist() for name, value in outputs.items()},
                    **{f"{name}_shape": list(value.shape[1:]) for name, value in outputs.items()},
                }
                for i, p in enumerate(group)
            ]
        scores = next(iter(outputs.values())).reshape(len(group), -1).astype(np.float32, copy=False)
        if self.spec.apply_softmax:
            scores = softmax(SoftmaxAttrs(axis=-1), scores)
        k = min(self.spec.top, scores.shape[1])
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        labels = self.spec.labels
        return [
            {
                **identity(p.item),
                "top_class": order[i].tolist(),
                "top_score": scores[i, order[i]].tolist(),
                "top_label": [labels[c] if c < len(labels) else str(c) for c in order[i]],
            }
            for i, p in enumerate(group)
        ]


def load_image(path: str) -> Any:
    """A decoded PIL image (loaded now, so that decoding happens in the caller's thread)."""
    from PIL import UnidentifiedImageError

    try:
        with open_image(path) as img:
            img.load()  # the pixels stay when the file closes
            return img if img.mode in ("RGB", "L") else img.convert("RGB")
    except FileNotFoundError:
        raise InputError(f"input file not found: {path}") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise InputError(f"{path}: not an image Pillow can read ({exc})") from None
