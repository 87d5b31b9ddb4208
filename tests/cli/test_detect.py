"""`edgecnn detect`: JSON Lines, tables, --save images and video, bad inputs skipped or fatal
(--strict), a classifier refused, Darknet models with --weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from edgecnn.cli.app import app
from edgecnn.vision.faces import bundled_path

pytest.importorskip("av")
FACE_JPG = bundled_path("simplecnn/samples/face.jpg")
FAST_FACES = ("--faces", "--scales", "1", "--stride", "0.5")


def invoke(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_faces_json_lines_with_a_bad_file_skipped(tmp_path: Path) -> None:
    bad = tmp_path / "bad.png"
    bad.write_text("nope")
    result = invoke("detect", *FAST_FACES, FACE_JPG, bad, "--json")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]  # type: ignore[attr-defined]
    assert lines[0]["source"] == str(FACE_JPG) and lines[0]["width"] == 128
    assert {"label", "score", "box", "class_id"} <= set(lines[0]["detections"][0])
    assert lines[1]["source"] == str(bad) and "error" in lines[1]
    assert f"skipped {bad}" in result.stderr  # type: ignore[attr-defined]


def test_strict_stops_at_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.png"
    bad.write_text("nope")
    result = invoke("detect", *FAST_FACES, bad, "--strict")
    assert result.exit_code == 1 and "not an image" in result.stderr  # type: ignore[attr-defined]


def test_save_writes_images_and_a_video(tmp_path: Path) -> None:
    from tests.vision.test_sources import write_video

    from edgecnn.vision.sources import video_frame_count

    video = write_video(tmp_path / "clip.mp4", frames=4)
    out = tmp_path / "out"
    result = invoke("detect", *FAST_FACES, FACE_JPG, video, "--save", out)
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert "face.jpg" in result.stdout and "frame 3" in result.stdout  # type: ignore[attr-defined]
    assert Image.open(out / "face.jpg").size == (128, 128)
    assert video_frame_count(str(out / "clip.mp4")) == 4


def test_a_classifier_is_refused() -> None:
    result = invoke("detect", bundled_path("simplecnn/face_binary_cls.onnx"), FACE_JPG)
    assert result.exit_code == 1 and "not a detection head" in result.stderr  # type: ignore[attr-defined]


def test_darknet_model_with_weights(tmp_path: Path) -> None:
    from tests.vision.test_detector import noise_image, small_darknet

    cfg, weights = small_darknet(tmp_path, "yolov3-tiny")
    image = tmp_path / "noise.png"
    noise_image().save(image)
    result = invoke("detect", cfg, image, "--weights", weights, "--score", "0.3", "--json")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    (record,) = [json.loads(line) for line in result.stdout.splitlines()]  # type: ignore[attr-defined]
    assert record["detections"] and all(0 <= d["box"][0] <= 200 for d in record["detections"])


def test_frames_in_flight_print_what_one_frame_at_a_time_prints(tmp_path: Path) -> None:
    """yolov3-tiny on a video, an unreadable file and an image, with three frames in flight and with
    one at a time: the same JSON lines in the same order, the same annotated image, a video of every
    frame (--score high enough to leave a few of the seeded model's boxes to draw); with
    --strict it stops at the unreadable file after printing every frame before it."""
    from tests.vision.test_detector import noise_image, small_darknet

    from edgecnn.vision.sources import video_frame_count
    from edgecnn.vision.video import VideoWriter

    cfg, weights = small_darknet(tmp_path, "yolov3-tiny")
    video = tmp_path / "clip.mp4"
    with VideoWriter(video, 10) as writer:
        for seed in range(5):
            writer.write(noise_image(seed=seed), seed / 10)
    bad = tmp_path / "bad.png"
    bad.write_text("nope")
    image = tmp_path / "noise.png"
    noise_image(seed=9).save(image)
    outputs = {}
    for streams, strict in ((1, False), (3, False), (3, True)):
        out = tmp_path / f"out{streams}{strict}"
        result = invoke(
            "detect", cfg, video, bad, image, "--weights", weights, "--score", "0.75", "--json",
            "--save", out, "--streams", streams, *(["--strict"] if strict else []),
        )  # fmt: skip
        assert result.exit_code == (1 if strict else 0), result.output  # type: ignore[attr-defined]
        assert video_frame_count(str(out / "clip.mp4")) == 5
        outputs[streams, strict] = result.stdout.splitlines()  # type: ignore[attr-defined]
    assert len(outputs[1, False]) == 7 and outputs[1, False] == outputs[3, False]
    # the annotated image is the same file; x264's output varies from run to run even on one stream
    assert (tmp_path / "out1False/noise.png").read_bytes() == (tmp_path / "out3False/noise.png").read_bytes()
    assert outputs[3, True] == outputs[1, False][:5]
    records = [json.loads(line) for line in outputs[1, False]]
    assert [r["index"] for r in records[:5]] == list(range(5)) and "error" in records[5]
    assert any(r["detections"] for r in records[:5])
