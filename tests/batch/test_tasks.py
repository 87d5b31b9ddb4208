"""The worker's Runner in this process: the same scores as running the model directly, one row per
item in order, and an error row (not an exception) for each bad item."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import edgecnn
from batch.support import FACE_MODEL, FACE_TASK
from edgecnn.batch.items import list_items
from edgecnn.batch.job import BatchJob, with_shared_model
from edgecnn.batch.tasks import Runner, TaskSpec, columns
from edgecnn.errors import InputError
from edgecnn.importers.darknet import write_random_weights
from edgecnn.ops.activation import SoftmaxAttrs, softmax
from edgecnn.vision import Detector
from edgecnn.vision.preprocess import Preprocess


@pytest.fixture(scope="module")
def face_net() -> edgecnn.Model:
    return edgecnn.load(FACE_MODEL, threads=1)


@pytest.mark.parametrize("batch_size", [1, 8])
def test_classify_matches_the_model(image_folder: Path, face_net: edgecnn.Model, batch_size: int) -> None:
    items = list_items([image_folder / "a"])
    runner = Runner(face_net, FACE_TASK, batch_size)
    rows = runner.infer([runner.prepare(i) for i in items])
    assert [r["index"] for r in rows] == [i.index for i in items]
    broken = [r for r in rows if r["error"]]
    assert len(broken) == 1 and "broken.jpg" in broken[0]["error"] and "top_class" not in broken[0]
    for item, row in zip(items, rows):
        if row["error"]:
            continue
        scores = softmax(SoftmaxAttrs(axis=-1), face_net(FACE_TASK.preprocess.image(item.path)))[0]
        assert row["top_class"] == list(np.argsort(-scores, kind="stable"))
        np.testing.assert_allclose(row["top_score"], np.sort(scores)[::-1], rtol=1e-4, atol=1e-6)
        assert row["top_label"] == [("background", "face")[c] for c in row["top_class"]]


def test_arrays_raw_outputs_and_wrong_shapes(tmp_path: Path, face_net: edgecnn.Model) -> None:
    rng = np.random.default_rng(0)
    good = rng.random((3, 3, 128, 128), dtype=np.float32)
    np.save(tmp_path / "good.npy", good)
    np.save(tmp_path / "bad.npy", np.zeros((1, 3, 64, 64), np.float32))
    items = list_items([tmp_path / "good.npy", tmp_path / "bad.npy"])
    spec = TaskSpec("raw")
    runner = Runner(face_net, spec, 4)
    rows = runner.infer([runner.prepare(i) for i in items])
    name = face_net.outputs[0].name
    assert set(columns(spec, face_net)) == {"index", "path", "row", "error", name, f"{name}_shape"}
    for k in range(3):
        np.testing.assert_allclose(rows[k][name], face_net(good[k : k + 1])[0], rtol=1e-4, atol=1e-5)
        assert rows[k][f"{name}_shape"] == [2] and rows[k]["row"] == k
    assert "sample shape [3, 64, 64], the model expects [3, 128, 128]" in rows[3]["error"]


def test_letterbox_pads_instead_of_stretching(image_folder: Path, face_net: edgecnn.Model) -> None:
    item = next(i for i in list_items([image_folder / "a"]) if not i.path.endswith("broken.jpg"))
    plain = Runner(face_net, FACE_TASK, 1).prepare(item).tensor
    boxed = Runner(face_net, dataclasses.replace(FACE_TASK, letterbox=True), 1).prepare(item).tensor
    assert plain is not None and boxed is not None and plain.shape == boxed.shape == (3, 128, 128)
    with pytest.raises(InputError, match="letterbox"):
        TaskSpec("classify", letterbox=True)
    with pytest.raises(InputError, match="task must be"):
        TaskSpec("segment")


def assert_same_detections(got: Iterable[tuple[str, float, Sequence[float]]], want: Iterable) -> None:
    """The same boxes per label, up to float32 noise (ties may come in another order)."""
    by_label: dict[str, list[list]] = {}
    for side, detections in enumerate((got, want)):
        for label, score, box in detections:
            by_label.setdefault(label, [[], []])[side].append((score, *box))
    for label, (mine, theirs) in by_label.items():
        assert len(mine) == len(theirs), label
        np.testing.assert_allclose(np.sort(mine, axis=0), np.sort(theirs, axis=0), atol=2e-2, err_msg=label)


@pytest.mark.slow
def test_detect_rows_are_the_detectors_boxes_also_from_the_shared_model(
    tmp_path: Path, image_folder: Path
) -> None:
    fixtures = Path("/work/shared/fixtures/darknet")
    if not fixtures.is_dir():
        fixtures = Path(__file__).parents[1] / "fixtures" / "darknet"
    cfg = tmp_path / "yolov3-tiny.cfg"
    text = (fixtures / "yolov3-tiny.cfg").read_text()
    cfg.write_text(re.sub(r"^(width|height)=\d+", r"\1=96", text, flags=re.M))
    weights = tmp_path / "yolov3-tiny.weights"
    write_random_weights(cfg, weights, seed=5)
    items = list_items([image_folder / "b"])[:2]
    spec = TaskSpec("detect", score_threshold=0.5)
    net = edgecnn.load(cfg, weights, threads=1)
    job = with_shared_model(BatchJob(str(cfg), str(tmp_path), spec, weights=str(weights)), net, tmp_path)
    assert job.model == str(tmp_path / "_model.ecnn") and job.weights is None
    detector = Detector.load(cfg, weights=str(weights), score_threshold=0.5, threads=1)
    for model in (net, edgecnn.load(job.model, threads=1)):
        runner = Runner(model, spec, 1)  # one image per run, as the detector runs them
        rows = runner.infer([runner.prepare(i) for i in items])
        for item, row in zip(items, rows):
            found = detector.detect(Image.open(item.path))
            assert row["error"] is None and found
            got = zip(row["labels"], row["scores"], row["boxes"])
            want = [(d.label, d.score, d.box) for d in found]
            assert_same_detections(got, want)
    assert Runner(net, spec, 1).prepare(dataclasses.replace(items[0], kind="array")).error


def test_a_decompression_bomb_is_an_error_row(tmp_path: Path, face_net: edgecnn.Model) -> None:
    Image.new("L", (9500, 9500)).save(tmp_path / "bomb.png")  # over Pillow's pixel limit, ~90 KB
    (item,) = list_items([str(tmp_path)])
    prepared = Runner(face_net, FACE_TASK, 1).prepare(item)
    assert prepared.error is not None and "decompression bomb" in prepared.error


def reference_pixels(path: Path, pre: Preprocess) -> np.ndarray:
    """``edgecnn run``'s pre-processing written out step by step: whole-image float32 arithmetic."""
    with Image.open(path) as opened:
        img = opened.convert("L" if pre.grayscale else "RGB")
        if pre.size is not None:
            img = img.resize((pre.size[1], pre.size[0]), Image.Resampling.BILINEAR)
        x = np.asarray(img, dtype=np.float32)
    x = x[:, :, None] if x.ndim == 2 else x
    x = x[:, :, ::-1] if pre.channel_order == "bgr" else x
    x = x.astype(np.float32) * np.float32(pre.scale)
    if pre.mean:
        x = x - np.asarray(pre.mean, dtype=np.float32)
    if pre.std:
        x = np.divide(x, np.asarray(pre.std, dtype=np.float32), dtype=np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1) if pre.layout == "nchw" else x)


@pytest.mark.parametrize(
    "pre",
    [
        FACE_TASK.preprocess,
        Preprocess((60, 45), "rgb", 1 / 255, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        Preprocess((33, 33), "bgr", 1.0, (104.0, 117.0, 123.0), layout="nhwc"),
        Preprocess(None, "rgb", 0.5, (1.0,), (2.0,)),
        Preprocess((20, 30), grayscale=True, scale=1 / 255, mean=(0.5,), std=(0.25,)),
    ],
)
def test_tensors_are_bit_identical_to_the_plain_arithmetic(tmp_path: Path, pre: Preprocess) -> None:
    rng = np.random.default_rng(7)
    pixels = rng.integers(0, 256, (41, 53, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "rgb.jpg", quality=90)
    Image.fromarray(pixels).convert("P").save(tmp_path / "palette.png")
    Image.fromarray(np.dstack([pixels, pixels[:, :, :1]])).save(tmp_path / "rgba.png")
    Image.fromarray(pixels[:, :, 0]).save(tmp_path / "gray.png")
    net = edgecnn.load(FACE_MODEL, threads=1)
    runner = Runner(net, dataclasses.replace(FACE_TASK, preprocess=pre), 1)
    for path in sorted(tmp_path.iterdir()):
        want = reference_pixels(path, pre)
        got = runner._image(str(path))
        assert got.dtype == np.float32 and got.flags.c_contiguous and np.array_equal(got, want), path.name
        assert np.array_equal(pre.image(path)[0], want), path.name


def test_every_run_is_padded_to_the_batch_size(
    image_folder: Path, face_net: edgecnn.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One plan per worker, and an item's row does not depend on how many items shared its run:
    plans for other sizes may choose kernels that round differently (the tuned ones do here)."""
    items = [i for i in list_items([image_folder / "a"]) if not i.path.endswith("broken.jpg")][:8]
    runner = Runner(face_net, dataclasses.replace(FACE_TASK, kind="raw"), 8)
    prepared = [runner.prepare(i) for i in items]
    whole = runner.infer(prepared)
    sizes: list[int] = []
    run = runner.net.run

    def spy(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        sizes.append(len(feeds[runner.input_name]))
        return run(feeds)

    monkeypatch.setattr(runner.net, "run", spy)
    assert runner.infer(prepared[:3]) + runner.infer(prepared[3:]) == whole
    assert [runner.infer([p])[0] for p in prepared] == whole
    assert sizes == [8] * 10
