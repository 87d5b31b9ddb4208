"""Frame sources: images, folders, a video written here with PyAV, stdin paths, bad inputs, looping,
and the reader thread."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import pytest
from PIL import Image

from edgecnn.errors import InputError
from edgecnn.vision import Detector, Frame, FrameError, open_sources
from edgecnn.vision.pipeline import prepared_frames
from edgecnn.vision.sources import camera_device, video_frame_count
from edgecnn.vision.video import VideoWriter

pytest.importorskip("av")


def write_video(path: Path, frames: int = 6, rate: int = 10) -> Path:
    with VideoWriter(path, rate) as writer:
        for i in range(frames):
            writer.write(Image.new("RGB", (64, 48), (40 * i, 0, 0)), i / rate)
    return path


def make_tree(root: Path) -> list[Path]:
    (root / "b").mkdir(parents=True)
    paths = [root / "a.png", root / "b" / "c.jpg", root / "b" / "d.png"]
    for path in paths:
        Image.new("RGB", (16, 8)).save(path)
    (root / "notes.txt").write_text("not an image")
    return paths


def test_video_read_back_frame_by_frame(tmp_path: Path) -> None:
    path = write_video(tmp_path / "clip.mp4")
    frames = list(open_sources([str(path)]))
    assert video_frame_count(str(path)) == 6
    assert [f.index for f in frames if isinstance(f, Frame)] == list(range(6))
    assert [round(f.timestamp, 3) for f in frames if isinstance(f, Frame) and f.timestamp is not None] == [
        0.0,
        0.1,
        0.2,
        0.3,
        0.4,
        0.5,
    ]
    assert all(isinstance(f, Frame) and f.image.size == (64, 48) for f in frames)


def test_folder_is_recursive_and_sorted(tmp_path: Path) -> None:
    paths = make_tree(tmp_path)
    items = list(open_sources([str(tmp_path)]))
    assert [i.source for i in items] == [str(p) for p in paths]
    assert all(isinstance(i, Frame) and i.timestamp is None and i.index == 0 for i in items)


def test_stdin_lists_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = make_tree(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{paths[1]}\n\n{paths[0]}\n"))
    assert [i.source for i in open_sources(["-"])] == [str(paths[1]), str(paths[0])]


def test_bad_inputs_become_frame_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 not really a jpeg")
    bad_video = tmp_path / "bad.mp4"
    bad_video.write_bytes(b"\x00" * 100)
    items = list(open_sources([str(broken), str(tmp_path / "missing.png"), str(bad_video)]))
    assert all(isinstance(i, FrameError) for i in items)
    assert [i.message.split(" (")[0] for i in items] == [  # type: ignore[union-attr]
        "not an image Pillow can read",
        "file not found",
        "cannot open video",
    ]


def test_loop_repeats_files(tmp_path: Path) -> None:
    paths = make_tree(tmp_path)
    looped = list(itertools.islice(open_sources([str(paths[0])], loop=True), 3))
    assert [i.source for i in looped] == [str(paths[0])] * 3


def test_no_source_is_an_input_error() -> None:
    with pytest.raises(InputError):
        next(open_sources([]))
    assert camera_device("0") == "/dev/video0" and camera_device("/dev/video2") == "/dev/video2"


def test_missing_camera_is_reported(tmp_path: Path) -> None:
    (item,) = list(open_sources([], camera=str(tmp_path / "no-such-camera")))
    assert isinstance(item, FrameError) and item.source.startswith("camera:")


def test_reader_thread_keeps_order_and_stops_early(tmp_path: Path) -> None:
    path = write_video(tmp_path / "clip.mp4", frames=8)
    detector = Detector.faces(scales=(1.0,))
    seen = [item.index for item, prepared in prepared_frames(detector, open_sources([str(path)]), depth=2)]
    assert seen == list(range(8))
    stream = prepared_frames(detector, open_sources([str(path)], loop=True), depth=2)
    assert [next(stream)[0].index for _ in range(3)] == [0, 1, 2]
    stream.close()  # stops the endless reader


def test_codecs_get_one_thread_per_core_beyond_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from edgecnn.vision import sources, video

    for cores, threads in ((1, 1), (2, 1), (8, 7)):
        monkeypatch.setattr(sources, "available_cores", lambda cores=cores: cores)
        assert sources.codec_threads() == threads
        assert video.encoder_options("libx264") == {"preset": "ultrafast", "threads": str(threads)}
    assert video.encoder_options("mpeg4") == {}
