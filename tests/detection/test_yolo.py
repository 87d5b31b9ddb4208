"""YOLO decoders against 2x2 grids computed by hand (logits chosen so sigmoids are exact), and
against a transcription that decodes every cell on random grids."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgecnn.detection.nms import Detections
from edgecnn.detection.yolo import (
    METADATA_PREFIX,
    RegionDecoder,
    YoloV1Decoder,
    YoloV3Decoder,
    decode,
    decoder_from_metadata,
    decoders_from_metadata,
    undo_letterbox,
)

LOW = -30.0  # sigmoid(LOW) ~ 1e-13: "no object"


def assert_detections(got: Detections, boxes: list, scores: list, classes: list) -> None:
    order = np.argsort(-got.scores, kind="stable")
    np.testing.assert_allclose(got.boxes[order], np.array(boxes, np.float32).reshape(-1, 4), atol=1e-4)
    np.testing.assert_allclose(got.scores[order], scores, atol=1e-5)
    assert got.classes[order].tolist() == classes


def test_yolov3_decoder_2x2_by_hand() -> None:
    # 1 anchor of this output (mask 1 -> anchor (10, 14) in pixels), 2 classes, 64x64 input.
    raw = np.zeros((1, 7, 2, 2), np.float32)
    raw[0, 4] = LOW
    row, col = 0, 1
    raw[0, 0, row, col] = math.log(3)  # sigmoid = 0.75 -> cx = (1 + 0.75) / 2 * 64 = 56
    raw[0, 2, row, col] = math.log(2)  # w = 2 * 10 = 20
    raw[0, 4, row, col] = math.log(9)  # objectness 0.9
    raw[0, 5, row, col] = math.log(4)  # class 0: 0.8
    raw[0, 6, row, col] = -math.log(4)  # class 1: 0.2
    decoder = YoloV3Decoder((64, 64), anchors=(5, 5, 10, 14), mask=(1,), classes=2)
    (dets,) = decoder(raw, score_threshold=0.1)
    # cy = (0 + 0.5) / 2 * 64 = 16, h = 14
    assert_detections(dets, [[46, 9, 66, 23], [46, 9, 66, 23]], [0.72, 0.18], [0, 1])
    (dets,) = decoder(raw, score_threshold=0.25)
    assert_detections(dets, [[46, 9, 66, 23]], [0.72], [0])


def test_yolov3_scale_x_y() -> None:
    raw = np.full((1, 6, 2, 2), LOW, np.float32)
    raw[0, 0:4, 1, 1] = 0.0  # sigmoid 0.5, exp 1
    raw[0, 4:6, 1, 1] = 20.0
    decoder = YoloV3Decoder((40, 40), anchors=(4, 8), mask=(0,), classes=1, scale_x_y=2.0)
    (dets,) = decoder(raw)
    # cx = (1 + 0.5 * 2 - 0.5) / 2 * 40 = 30
    assert_detections(dets, [[28, 26, 32, 34]], [1.0], [0])


def test_region_decoder_2x2_by_hand() -> None:
    # 1 anchor (1.5, 0.5) in grid cells, 2 classes with softmax, 64x64 input.
    raw = np.zeros((1, 7, 2, 2), np.float32)
    raw[0, 4] = LOW
    row, col = 1, 0
    raw[0, 1, row, col] = math.log(3)  # cy = (1 + 0.75) / 2 * 64 = 56
    raw[0, 2, row, col] = math.log(2)  # w = 2 * 1.5 / 2 * 64 = 96
    raw[0, 4, row, col] = math.log(4)  # objectness 0.8
    raw[0, 5, row, col] = math.log(3)  # softmax([ln 3, 0]) = [0.75, 0.25]
    decoder = RegionDecoder((64, 64), anchors=(1.5, 0.5), num=1, classes=2)
    (dets,) = decoder(raw, score_threshold=0.1)
    # cx = 0.5 / 2 * 64 = 16, h = 0.5 / 2 * 64 = 16
    assert_detections(dets, [[-32, 48, 64, 64]] * 2, [0.6, 0.2], [0, 1])


def test_region_decoder_anchor_order_and_batch() -> None:
    # 2 anchors, 1 class; anchor 1 fires in image 1 only.
    raw = np.full((2, 12, 2, 2), LOW, np.float32)
    raw[:, [0, 1, 2, 3, 6, 7, 8, 9]] = 0.0
    raw[1, 10:12, 0, 0] = 20.0
    decoder = RegionDecoder((32, 32), anchors=(1, 1, 2, 1), num=2, classes=1)
    first, second = decoder(raw)
    assert len(first) == 0
    # cx = cy = 0.5 / 2 * 32 = 8, w = 2 / 2 * 32 = 32, h = 16
    assert_detections(second, [[-8, 0, 24, 16]], [1.0], [0])


def test_yolov1_decoder_2x2_by_hand() -> None:
    side, num, classes = 2, 1, 2
    probs = np.zeros((4, classes), np.float32)
    confidence = np.zeros((4, num), np.float32)
    boxes = np.zeros((4, num, 4), np.float32)
    probs[3] = [0.3, 0.7]  # cell 3 = row 1, col 1
    confidence[3] = 0.5
    boxes[3, 0] = [0.5, 0.25, 0.6, 0.4]
    raw = np.concatenate([probs.ravel(), confidence.ravel(), boxes.ravel()])[None]
    decoder = YoloV1Decoder((100, 50), side=side, num=num, classes=classes, sqrt=True)
    # cx = 1.5 / 2 * 100 = 75, cy = 1.25 / 2 * 50 = 31.25, w = 0.36 * 100, h = 0.16 * 50
    (dets,) = decoder(raw, score_threshold=0.1)
    assert_detections(dets, [[57, 27.25, 93, 35.25]] * 2, [0.35, 0.15], [1, 0])
    (dets,) = YoloV1Decoder((100, 50), side=2, num=1, classes=2, sqrt=False)(raw, 0.3)
    assert_detections(dets, [[45, 21.25, 105, 41.25]], [0.35], [1])


def test_yolov1_softmax_and_size_check() -> None:
    raw = np.zeros((1, 1 * 1 * (2 + 1 * 5)), np.float32)
    raw[0, 2] = 1.0  # confidence
    raw[0, 3:7] = [0.5, 0.5, 1.0, 1.0]
    decoder = YoloV1Decoder((10, 10), side=1, num=1, classes=2, softmax=True)
    (dets,) = decoder(raw, score_threshold=0.4)
    assert_detections(dets, [[0, 0, 10, 10]] * 2, [0.5, 0.5], [0, 1])
    with pytest.raises(ValueError, match="7 values"):
        decoder(np.zeros((1, 8), np.float32))


def test_channel_count_checked() -> None:
    with pytest.raises(ValueError, match=r"\(14, H, W\)"):
        YoloV3Decoder((32, 32), anchors=(1, 1, 2, 2), mask=(0, 1), classes=2)(np.zeros((1, 13, 2, 2)))


def test_metadata_round_trip_and_decode_with_nms() -> None:
    v3 = YoloV3Decoder((64, 64), anchors=(10, 14, 20, 20), mask=(0, 1), classes=1)
    v2 = RegionDecoder((64, 64), anchors=(1.0, 1.0), num=1, classes=1)
    metadata = {
        METADATA_PREFIX + "a": v3.to_metadata(cfg={"ignore_thresh": 0.7}),
        METADATA_PREFIX + "b": v2.to_metadata(),
        "other": "x",
    }
    decoders = decoders_from_metadata(metadata)
    assert decoders == {"a": v3, "b": v2}
    raw_a = np.full((1, 12, 1, 1), LOW, np.float32)
    raw_a[0, [0, 1, 2, 3, 6, 7, 8, 9]] = 0.0
    raw_a[0, [4, 5]] = math.log(9)  # anchor 0: score 0.81, box 10x14 at (32, 32)
    raw_a[0, [10, 11]] = math.log(4)  # anchor 1: score 0.64, box 20x20 at (32, 32)
    raw_b = np.full((1, 6, 2, 2), LOW, np.float32)
    (dets,) = decode(decoders, {"a": raw_a, "b": raw_b}, score_threshold=0.25, iou_threshold=0.3)
    # IoU(10x14, 20x20 same centre) = 140/400 = 0.35 > 0.3: the weaker box goes.
    assert_detections(dets, [[27, 25, 37, 39]], [0.81], [0])
    (dets,) = decode(decoders, {"a": raw_a, "b": raw_b}, iou_threshold=0.4)
    assert len(dets) == 2
    with pytest.raises(ValueError, match="not a YOLO decoder"):
        decoder_from_metadata('{"type": "ssd"}')
    with pytest.raises(ValueError, match="no YOLO decoders"):
        decode({}, {})


def test_undo_letterbox() -> None:
    # A 200x100 image letterboxed into 64x64: scale 0.32, placed at y offset 16.
    boxes = np.array([[0, 16, 64, 48], [32, 32, 48, 40]], np.float32)
    np.testing.assert_allclose(
        undo_letterbox(boxes, (200, 100), (64, 64)), [[0, 0, 200, 100], [100, 50, 150, 75]], atol=1e-4
    )


def every_cell(decoder: RegionDecoder | YoloV3Decoder, raw: np.ndarray, threshold: float) -> Detections:
    """Darknet's formulas on every cell and anchor of one image, then the threshold: what the
    decoders give without leaving out the boxes whose objectness cannot pass."""
    num = decoder.num if isinstance(decoder, RegionDecoder) else len(decoder.mask)
    t = raw.astype(np.float64).reshape(num, -1, *raw.shape[1:]).transpose(2, 3, 0, 1)
    rows, cols = np.meshgrid(np.arange(t.shape[0]), np.arange(t.shape[1]), indexing="ij")
    rows, cols = rows[..., None], cols[..., None]
    (width, height), (grid_h, grid_w) = decoder.input_size, t.shape[:2]
    sigmoid = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    if isinstance(decoder, RegionDecoder):
        anchors = np.asarray(decoder.anchors).reshape(-1, 2)
        cx, cy = (cols + sigmoid(t[..., 0])) / grid_w * width, (rows + sigmoid(t[..., 1])) / grid_h * height
        w = np.exp(t[..., 2]) * anchors[:, 0] / grid_w * width
        h = np.exp(t[..., 3]) * anchors[:, 1] / grid_h * height
        logits = t[..., 5:]
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs = probs / probs.sum(-1, keepdims=True) if decoder.softmax else logits
    else:
        anchors = np.asarray(decoder.anchors).reshape(-1, 2)[list(decoder.mask)]
        s = decoder.scale_x_y
        cx = (cols + sigmoid(t[..., 0]) * s - (s - 1) / 2) / grid_w * width
        cy = (rows + sigmoid(t[..., 1]) * s - (s - 1) / 2) / grid_h * height
        w, h = np.exp(t[..., 2]) * anchors[:, 0], np.exp(t[..., 3]) * anchors[:, 1]
        probs = sigmoid(t[..., 5:])
    scores = (sigmoid(t[..., 4:5]) * probs).reshape(-1, probs.shape[-1])
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1).reshape(-1, 4)
    box, label = np.nonzero(scores > threshold)
    return Detections(boxes[box].astype(np.float32), scores[box, label].astype(np.float32), label)


@settings(max_examples=30, deadline=None)
@given(
    kind=st.sampled_from(["region", "region-no-softmax", "yolo"]),
    grid=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    anchors=st.integers(1, 3),
    classes=st.integers(1, 6),
    threshold=st.sampled_from([0.0, 0.25, 0.5, 0.9]),
    seed=st.integers(0, 2**16),
)
def test_decoders_match_every_cell_transcription(
    kind: str, grid: tuple[int, int], anchors: int, classes: int, threshold: float, seed: int
) -> None:
    """The decoders skip boxes whose objectness is under the threshold: the same boxes, scores and
    classes, in the same order, as decoding every cell (logits spread so that many pass)."""
    rng = np.random.default_rng(seed)
    sizes = tuple(rng.uniform(0.5, 4, 2 * anchors).round(2))
    decoder: RegionDecoder | YoloV3Decoder
    if kind == "yolo":
        decoder = YoloV3Decoder((64, 48), sizes, tuple(range(anchors)), classes, scale_x_y=1.05)
    else:
        decoder = RegionDecoder((64, 48), sizes, anchors, classes, softmax=kind == "region")
    raw = rng.normal(0, 3, (2, anchors * (5 + classes), *grid)).astype(np.float32)
    for got, image in zip(decoder(raw, threshold), raw, strict=True):
        want = every_cell(decoder, image, threshold)
        assert got.classes.tolist() == want.classes.tolist()
        np.testing.assert_allclose(got.boxes, want.boxes, rtol=1e-6, atol=1e-4)
        np.testing.assert_allclose(got.scores, want.scores, rtol=1e-6)
