"""Detector: Darknet v2/v3-tiny boxes against a transcription of darknet's C decoding with OpenCV's
NMS, OpenCV's own Darknet reader where the installed OpenCV still has it (4.x), ONNX v8/v5-style
heads, letterbox round trips, refusals, and the face detector."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from PIL import Image

from edgecnn.errors import InputError, ModelFormatError
from edgecnn.importers.darknet import write_random_weights
from edgecnn.vision import Detection, Detector
from edgecnn.vision.detector import InputFormat
from edgecnn.vision.draw import draw_detections
from edgecnn.vision.heads import parse_head

cv2 = pytest.importorskip("cv2")
FIXTURES = Path("/work/shared/fixtures/darknet")
if not FIXTURES.is_dir():
    FIXTURES = Path(__file__).parents[1] / "fixtures" / "darknet"
SIZE = 224  # the fixtures' 416 inputs shrunk, to keep the tests fast
THRESHOLD = 0.3
IOU = 0.45
OPENCV_REGION_IOU = 0.4  # OpenCV's Region layer default; its Darknet reader passes none for [region]


def small_darknet(tmp_path: Path, name: str, seed: int = 3) -> tuple[Path, Path]:
    text = (FIXTURES / f"{name}.cfg").read_text()
    cfg = tmp_path / f"{name}.cfg"
    cfg.write_text(re.sub(r"^(width|height)=\d+", rf"\1={SIZE}", text, flags=re.M))
    weights = tmp_path / f"{name}.weights"
    write_random_weights(cfg, weights, seed=seed)
    return cfg, weights


def noise_image(width: int = 200, height: int = 150, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8))


def logistic(x: float) -> float:
    return 1.0 / (1.0 + np.exp(-x))


def darknet_boxes(raw: np.ndarray, kind: str, anchors: list[float], mask: list[int], classes: int) -> list:
    """darknet's get_yolo_detections / get_region_detections, entry by entry as in the C code:
    (x, y, w, h relative to the network input, [prob per class])."""
    n_anchors, grid_h, grid_w = len(mask), raw.shape[-2], raw.shape[-1]
    flat = raw.reshape(-1)
    stride = grid_w * grid_h
    found = []
    for i in range(grid_w * grid_h):
        row, col = divmod(i, grid_w)
        for n in range(n_anchors):
            base = n * stride * (5 + classes) + i

            def entry(k: int, base: int = base) -> float:
                return float(flat[base + k * stride])

            objectness = logistic(entry(4))
            x = (col + logistic(entry(0))) / grid_w
            y = (row + logistic(entry(1))) / grid_h
            a = mask[n]
            if kind == "yolo":  # anchors in input pixels
                w, h = np.exp(entry(2)) * anchors[2 * a] / SIZE, np.exp(entry(3)) * anchors[2 * a + 1] / SIZE
                probs = [objectness * logistic(entry(5 + c)) for c in range(classes)]
            else:  # region: anchors in grid cells, softmax over classes
                w, h = (
                    np.exp(entry(2)) * anchors[2 * a] / grid_w,
                    np.exp(entry(3)) * anchors[2 * a + 1] / grid_h,
                )
                logits = np.array([entry(5 + c) for c in range(classes)])
                soft = np.exp(logits - logits.max())
                probs = list(objectness * soft / soft.sum())
            found.append((x, y, w, h, probs))
    return found


def reference_detections(
    found: list, image: Image.Image, letterbox: bool, iou: float = IOU
) -> list[tuple[int, float, list[float]]]:
    """darknet's correct_yolo_boxes (letterbox) or plain scaling, then OpenCV's NMSBoxes per class."""
    if letterbox:
        if SIZE / image.width < SIZE / image.height:
            new_w, new_h = SIZE, image.height * SIZE // image.width
        else:
            new_w, new_h = image.width * SIZE // image.height, SIZE
    else:
        new_w, new_h = SIZE, SIZE
    results = []
    classes = len(found[0][4])
    for c in range(classes):
        boxes, scores = [], []
        for x, y, w, h, probs in found:
            if probs[c] <= THRESHOLD:
                continue
            x = (x - (SIZE - new_w) / 2 / SIZE) / (new_w / SIZE) * image.width
            y = (y - (SIZE - new_h) / 2 / SIZE) / (new_h / SIZE) * image.height
            w, h = w * SIZE / new_w * image.width, h * SIZE / new_h * image.height
            boxes.append([x - w / 2, y - h / 2, w, h])
            scores.append(probs[c])
        for k in np.asarray(cv2.dnn.NMSBoxes(boxes, scores, THRESHOLD, iou)).reshape(-1):
            x1, y1, w, h = boxes[k]
            box = np.clip([x1, y1, x1 + w, y1 + h], 0, [image.width, image.height] * 2)
            results.append((c, scores[k], list(box)))
    return sorted(results, key=lambda r: -r[1])


def assert_same(ours: list[Detection], reference: list[tuple[int, float, list[float]]]) -> None:
    """One to one: same class, score within 1e-4, box within 1 pixel. Not by rank: scores of
    different classes a float32 rounding apart may come out in either order."""
    assert len(ours) == len(reference) > 0
    scores = np.array([d.score for d in ours])
    assert np.all(np.diff(scores) <= 0), "detections are not sorted by score"
    classes = np.array([d.class_id for d in ours])
    boxes = np.array([d.box for d in ours])
    free = np.ones(len(ours), bool)
    for class_id, score, box in reference:
        like = free & (classes == class_id) & (np.abs(scores - score) <= 1e-4)
        like &= np.abs(boxes - box).max(axis=1) <= 1.0
        assert like.any(), f"nothing like class {class_id}, score {score:.5f}, box {np.round(box, 2)}"
        free[np.argmax(like)] = False


@pytest.mark.parametrize(("name", "letterbox"), [("yolov2-tiny", False), ("yolov3-tiny", True)])
def test_darknet_tiny_matches_darknet_decoding(tmp_path: Path, name: str, letterbox: bool) -> None:
    cfg, weights = small_darknet(tmp_path, name)
    detector = Detector.load(cfg, weights=str(weights), score_threshold=THRESHOLD, iou_threshold=IOU)
    assert detector.input_format.letterbox is letterbox  # type: ignore[attr-defined]
    image = noise_image()
    prepared = detector.prepare(image)
    raw = detector.net.run(prepared.tensor)  # type: ignore[attr-defined]
    found = []
    for output, decoder in detector.head.decoders.items():  # type: ignore[attr-defined]
        mask = list(decoder.mask) if decoder.kind == "yolo" else list(range(decoder.num))
        found += darknet_boxes(raw[output], decoder.kind, list(decoder.anchors), mask, decoder.classes)
    assert_same(detector.detect(image), reference_detections(found, image, letterbox))


def opencv_cfg(cfg: Path) -> Path:
    """A copy of ``cfg`` whose output layers filter as the comparison needs in OpenCV's reader.

    OpenCV reads a [region]'s or [yolo]'s ``thresh`` as a score threshold (yolov2-tiny.cfg's
    ``thresh = .6`` is darknet's training-only no-object IoU) and NMSes inside each [yolo] unless
    ``nms_threshold=0``; a [region] always NMSes at OPENCV_REGION_IOU. Neither option changes weights.
    """
    text = re.sub(r"^\s*(thresh|nms_threshold)\s*=.*\n", "", cfg.read_text(), flags=re.M)
    text = re.sub(r"^\[region\]\n", rf"\g<0>thresh={THRESHOLD}\n", text, flags=re.M)
    text = re.sub(r"^\[yolo\]\n", rf"\g<0>thresh={THRESHOLD}\nnms_threshold=0\n", text, flags=re.M)
    copy = cfg.with_name(f"opencv-{cfg.name}")
    copy.write_text(text)
    return copy


@pytest.mark.skipif(not hasattr(cv2.dnn, "readNetFromDarknet"), reason="OpenCV >= 5 has no Darknet reader")
@pytest.mark.parametrize("name", ["yolov2-tiny", "yolov3-tiny"])
def test_darknet_tiny_matches_opencv_dnn(tmp_path: Path, name: str) -> None:
    """OpenCV's rows are [x, y, w, h, objectness, objectness x prob per class] relative to the input,
    class scores at or under ``thresh`` zeroed; NMS over all outputs at OpenCV's region IoU."""
    cfg, weights = small_darknet(tmp_path, name)
    detector = Detector.load(
        cfg,
        weights=str(weights),
        score_threshold=THRESHOLD,
        iou_threshold=OPENCV_REGION_IOU,
        resize="stretch",
    )
    image = noise_image()
    net = cv2.dnn.readNetFromDarknet(str(opencv_cfg(cfg)), str(weights))
    net.setInput(detector.prepare(image).tensor)  # type: ignore[attr-defined]
    rows = np.concatenate(
        [o.reshape(-1, o.shape[-1]) for o in net.forward(net.getUnconnectedOutLayersNames())]
    )
    found = [(r[0], r[1], r[2], r[3], list(r[5:])) for r in rows]
    reference = reference_detections(found, image, letterbox=False, iou=OPENCV_REGION_IOU)
    assert_same(detector.detect(image), reference)


@pytest.mark.parametrize("size", [(200, 150), (150, 200), (224, 224), (37, 300)])
def test_letterbox_round_trip(size: tuple[int, int]) -> None:
    fmt = InputFormat((SIZE, SIZE), letterbox=True)
    image = Image.new("RGB", size)
    tensor, placement = fmt.tensor(image)
    assert tensor.shape == (3, SIZE, SIZE)
    corners = np.array([[0, 0, size[0], size[1]], [10, 5, 20, 30]], np.float64)
    in_net = corners.reshape(-1, 2, 2) * placement.scale + placement.offset
    np.testing.assert_allclose(placement.to_image(in_net.reshape(-1, 4)), corners, atol=1e-9)
    # the image fills one axis and is centred on the other
    assert min(placement.offset) >= 0 and 0 in placement.offset


def anchor_free_model(path: Path, rows: np.ndarray, names: str | None = None) -> Path:
    """A 64x64 'detector' whose output is the constant ``rows`` plus 0 x input."""
    x = helper.make_tensor_value_info("images", onnx.TensorProto.FLOAT, [1, 3, 64, 64])
    y = helper.make_tensor_value_info("output0", onnx.TensorProto.FLOAT, list(rows.shape))
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
        helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
        helper.make_node("Add", ["table", "nothing"], ["output0"]),
    ]
    init = [
        numpy_helper.from_array(np.ascontiguousarray(rows, np.float32), "table"),
        numpy_helper.from_array(np.zeros((1,), np.float32), "zero"),
    ]
    graph = helper.make_graph(nodes, "anchor_free", [x], [y], init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    if names:
        helper.set_model_props(model, {"names": names})
    onnx.save(model, path)
    return path


V8_ROWS = np.zeros((1, 4 + 3, 8), np.float32)  # [batch, 4 + classes, N]
V8_ROWS[0, :4, 0] = [32, 32, 20, 10]  # cx, cy, w, h in input pixels
V8_ROWS[0, 4 + 2, 0] = 0.9  # class 2
V8_ROWS[0, :4, 1] = [33, 32, 20, 10]  # overlaps box 0: suppressed
V8_ROWS[0, 4 + 2, 1] = 0.8
V8_ROWS[0, :4, 2] = [10, 50, 8, 8]
V8_ROWS[0, 4 + 0, 2] = 0.5
V8_ROWS[0, 4 + 1, 3] = 0.1  # under the threshold


def test_yolov8_head_on_a_tiny_onnx_model(tmp_path: Path) -> None:
    path = anchor_free_model(tmp_path / "v8.onnx", V8_ROWS, "{0: 'cat', 1: 'dog', 2: 'bird'}")
    detector = Detector.load(path)
    assert "yolov8" in detector.description
    found = detector.detect(Image.new("RGB", (128, 64)))  # letterboxed: scale 0.5, offset (0, 16)
    assert [(d.label, round(d.score, 3)) for d in found] == [("bird", 0.9), ("cat", 0.5)]
    np.testing.assert_allclose(found[0].box, [44, 22, 84, 42], atol=1e-4)
    np.testing.assert_allclose(found[1].box, [12, 60, 28, 64], atol=1e-4)  # 76 clipped to the image


def test_yolov5_head_multiplies_objectness(tmp_path: Path) -> None:
    rows = np.zeros((1, 3, 5 + 2), np.float32)  # [batch, N, 5 + classes]
    rows[0, 0] = [32, 32, 16, 16, 0.5, 0.2, 0.9]
    rows[0, 1] = [10, 10, 4, 4, 0.1, 0.9, 0.9]  # 0.09: under the threshold
    path = anchor_free_model(tmp_path / "v5.onnx", rows)
    detector = Detector.load(path, head="yolov5", labels=None)
    (found,) = detector.detect(Image.new("RGB", (64, 64)))
    assert found.class_id == 1 and found.score == pytest.approx(0.45)
    assert found.box == pytest.approx((24, 24, 40, 40))


def test_classifier_is_refused_with_what_was_found() -> None:
    from edgecnn.vision.faces import BUNDLED_MODEL, bundled_path

    with pytest.raises(ModelFormatError, match=r"not a detection head.*conf float32\[1, 2\]"):
        Detector.load(bundled_path(BUNDLED_MODEL))


def test_head_names_are_checked() -> None:
    assert parse_head("yolov3:10,14,23,27") == ("yolov3", (10.0, 14.0, 23.0, 27.0))
    with pytest.raises(InputError, match="--head must be one of"):
        parse_head("ssd")
    with pytest.raises(InputError, match="pairs"):
        parse_head("yolov2:1,2,3")


def face_scene() -> tuple[Image.Image, tuple[int, int, int, int]]:
    from edgecnn.vision.faces import bundled_path

    scene = Image.open(bundled_path("simplecnn/samples/bg.jpg")).convert("RGB").resize((256, 192))
    face = Image.open(bundled_path("simplecnn/samples/face.jpg")).convert("RGB").resize((96, 96))
    scene.paste(face, (120, 48))
    return scene, (120, 48, 216, 144)


def test_face_detector_finds_a_pasted_face() -> None:
    detector = Detector.faces(scales=(0.5,), stride=0.125)
    scene, truth = face_scene()
    found = detector.detect(scene)
    assert found and found[0].label == "face"
    assert max(iou(d.box, truth) for d in found) > 0.5
    annotated = draw_detections(scene, found)
    assert annotated.size == scene.size and annotated.tobytes() != scene.tobytes()


def test_face_windows_batched_equal_one_by_one() -> None:
    batched = Detector.faces(scales=(0.6,), batch_size=64)
    single = Detector.faces(scales=(0.6,), batch_size=1)
    scene, _ = face_scene()
    pyramid = batched.prepare(scene)
    np.testing.assert_allclose(batched.face_scores(pyramid), single.face_scores(pyramid), atol=1e-5)  # type: ignore[attr-defined]


def iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
    return w * h / union
