"""Class-wise NMS: hand-checked cases and properties against a brute-force IoU."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgecnn.detection.nms import Detections, box_iou, class_nms, nms


def iou_scalar(a: list[float], b: list[float]) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def test_box_iou_by_hand() -> None:
    a = np.array([[0, 0, 10, 10]], np.float32)
    b = np.array([[1, 1, 11, 11], [10, 10, 20, 20], [0, 0, 5, 10], [0, 0, 0, 0]], np.float32)
    np.testing.assert_allclose(box_iou(a, b)[0], [81 / 119, 0.0, 0.5, 0.0])


def test_nms_suppresses_overlaps_above_threshold_only() -> None:
    boxes = np.array([[1, 1, 11, 11], [0, 0, 10, 10], [20, 20, 30, 30], [0, 0, 5, 10]], np.float32)
    scores = np.array([0.8, 0.9, 0.7, 0.6], np.float32)
    assert nms(boxes, scores, 0.45).tolist() == [1, 2]
    # IoU of box 3 with box 1 is exactly 0.5: Darknet drops only when IoU > threshold.
    assert nms(boxes, scores, 0.5).tolist() == [1, 2, 3]
    assert nms(boxes, scores, 0.7).tolist() == [1, 0, 2, 3]


def test_nms_ties_keep_input_order_and_empty_input() -> None:
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 10]], np.float32)
    assert nms(boxes, np.array([0.5, 0.5]), 0.3).tolist() == [0]
    assert nms(np.zeros((0, 4)), np.zeros(0), 0.3).tolist() == []
    with pytest.raises(ValueError, match="iou_threshold"):
        nms(boxes, np.array([0.5, 0.5]), 1.5)


def test_class_nms_keeps_overlapping_boxes_of_other_classes() -> None:
    dets = Detections(
        np.array([[0, 0, 10, 10], [1, 1, 11, 11], [1, 1, 11, 11]], np.float32),
        np.array([0.9, 0.8, 0.85], np.float32),
        np.array([0, 0, 1], np.int64),
    )
    kept = class_nms(dets, 0.45)
    assert kept.scores.tolist() == pytest.approx([0.9, 0.85])
    assert kept.classes.tolist() == [0, 1]
    assert len(class_nms(Detections.empty(), 0.45)) == 0


def test_detections_validate_shapes() -> None:
    with pytest.raises(ValueError, match="boxes"):
        Detections(np.zeros((2, 3)), np.zeros(2), np.zeros(2, np.int64))


boxes_strategy = st.integers(1, 12).flatmap(
    lambda n: st.tuples(
        st.lists(
            st.tuples(st.integers(0, 20), st.integers(0, 20), st.integers(1, 10), st.integers(1, 10)),
            min_size=n,
            max_size=n,
        ),
        st.lists(st.integers(0, 100), min_size=n, max_size=n),
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
    )
)


@settings(max_examples=40, deadline=None)
@given(boxes_strategy, st.sampled_from([0.0, 0.3, 0.5, 0.9]))
def test_nms_properties(data: tuple, threshold: float) -> None:
    corners, raw_scores, _ = data
    boxes = [[x, y, x + w, y + h] for x, y, w, h in corners]
    scores = np.array(raw_scores, np.float32) / 100
    kept = nms(np.array(boxes, np.float32), scores, threshold).tolist()
    assert all(scores[a] >= scores[b] for a, b in itertools.pairwise(kept))
    for i, a in enumerate(kept):
        assert all(iou_scalar(boxes[a], boxes[b]) <= threshold for b in kept[i + 1 :])
    for dropped in set(range(len(boxes))) - set(kept):
        assert any(
            scores[k] >= scores[dropped] and iou_scalar(boxes[k], boxes[dropped]) > threshold for k in kept
        )


@settings(max_examples=25, deadline=None)
@given(boxes_strategy)
def test_class_nms_is_nms_within_each_class(data: tuple) -> None:
    corners, raw_scores, labels = data
    boxes = np.array([[x, y, x + w, y + h] for x, y, w, h in corners], np.float32)
    dets = Detections(boxes, np.array(raw_scores, np.float32) / 100, np.array(labels, np.int64))
    kept = class_nms(dets, 0.4)
    assert np.all(np.diff(kept.scores) <= 0)
    for label in set(labels):
        members = dets.classes == label
        expected = nms(dets.boxes[members], dets.scores[members], 0.4)
        mine = kept.classes == label
        np.testing.assert_array_equal(kept.boxes[mine], dets.boxes[members][expected])


def reference_class_nms(dets: Detections, threshold: float) -> np.ndarray:
    """Darknet's greedy NMS one class at a time, one kept box at a time, then sorted by score
    (stable: lower class first, then input order): the indices kept."""
    kept = []
    for label in np.unique(dets.classes):
        members = np.flatnonzero(dets.classes == label)
        remaining = members[np.argsort(-dets.scores[members].astype(np.float64), kind="stable")]
        while len(remaining):
            best, remaining = remaining[0], remaining[1:]
            kept.append(best)
            remaining = remaining[box_iou(dets.boxes[best : best + 1], dets.boxes[remaining])[0] <= threshold]
    indices = np.asarray(kept, np.int64)
    return indices[np.argsort(-dets.scores[indices], kind="stable")]


@settings(max_examples=30, deadline=None)
@given(
    count=st.integers(0, 300),
    classes=st.integers(1, 4),
    threshold=st.sampled_from([0.0, 0.3, 0.45, 1.0]),
    block=st.sampled_from([1, 7, 1 << 18]),
    seed=st.integers(0, 2**16),
)
def test_class_nms_matches_one_class_at_a_time(
    count: int, classes: int, threshold: float, block: int, seed: int
) -> None:
    """Blocks of IoUs at a time (small blocks too) keep exactly the boxes, in exactly the order, of
    the class-by-class reference; scores on a coarse grid make ties common."""
    rng = np.random.default_rng(seed)
    corners = rng.uniform(0, 100, (count, 2))
    boxes = np.concatenate([corners, corners + rng.uniform(0, 40, (count, 2))], axis=1).astype(np.float32)
    scores = rng.integers(0, 20, count).astype(np.float32) / 20
    dets = Detections(boxes, scores, rng.integers(0, classes, count).astype(np.int64))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("edgecnn.detection.nms.BLOCK_ENTRIES", block)
        got = class_nms(dets, threshold)
    want = dets.take(reference_class_nms(dets, threshold))
    for field in ("boxes", "scores", "classes"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
