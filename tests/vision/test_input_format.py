"""InputFormat.tensor (one pass into the output window) against a plain numpy transcription, and
video frames scaled straight from their YUV planes against the Pillow path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from edgecnn.vision.detector import InputFormat
from edgecnn.vision.sources import Frame, VideoPicture, open_sources


def reference_tensor(fmt: InputFormat, image: Image.Image) -> tuple[np.ndarray, tuple[int, int]]:
    """Fill, paste the resized pixels, reorder channels, transpose, scale: step by step."""
    width, height = fmt.size
    if fmt.letterbox:
        ratio = min(width / image.width, height / image.height)
        inner = (max(1, round(image.width * ratio)), max(1, round(image.height * ratio)))
    else:
        inner = (width, height)
    left, top = (width - inner[0]) // 2, (height - inner[1]) // 2
    resized = np.asarray(image.convert("RGB").resize(inner, Image.Resampling.BILINEAR))
    canvas = np.full((height, width, 3), fmt.fill, np.float32)
    canvas[top : top + inner[1], left : left + inner[0]] = resized
    if fmt.channel_order == "bgr":
        canvas = canvas[:, :, ::-1]
    return np.ascontiguousarray(canvas.transpose(2, 0, 1)) * np.float32(fmt.scale), (left, top)


@settings(max_examples=60, deadline=None)
@given(
    image_size=st.tuples(st.integers(1, 90), st.integers(1, 90)),
    input_size=st.tuples(st.integers(1, 80), st.integers(1, 80)),
    letterbox=st.booleans(),
    order=st.sampled_from(["rgb", "bgr"]),
    scale=st.sampled_from([1 / 255, 1.0, 0.017]),
    fill=st.sampled_from([127.5, 114.0, 0.0]),
    seed=st.integers(0, 2**16),
)
def test_tensor_matches_reference(
    image_size: tuple[int, int],
    input_size: tuple[int, int],
    letterbox: bool,
    order: str,
    scale: float,
    fill: float,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (image_size[1], image_size[0], 3), dtype=np.uint8)
    image = Image.fromarray(pixels)
    fmt = InputFormat(input_size, letterbox, order, scale, fill)
    got, placement = fmt.tensor(image)
    want, offset = reference_tensor(fmt, image)
    assert got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    assert placement.offset == offset and placement.image_size == image.size


def smooth_video(path: Path, size: tuple[int, int], frames: int = 3) -> Path:
    """Frames of gradients and solid boxes: a camera-like picture, without per-pixel noise."""
    from edgecnn.vision.video import VideoWriter

    width, height = size
    x = np.linspace(0, 255, width)[None, :]
    y = np.linspace(0, 255, height)[:, None]
    with VideoWriter(path, rate=10) as writer:
        for index in range(frames):
            pixels = np.stack([x + 0 * y, y + 0 * x, (x + y + 40 * index) % 256], axis=-1).astype(np.uint8)
            pixels[height // 4 : height // 2, width // 5 + index : width // 2 + index] = (200, 30, 60)
            writer.write(Image.fromarray(pixels))
    return path


@pytest.mark.parametrize(("input_size", "letterbox"), [((40, 40), True), ((40, 40), False), ((24, 52), True)])
def test_video_frame_tensor_is_close_to_the_pillow_path(
    tmp_path: Path, input_size: tuple[int, int], letterbox: bool
) -> None:
    """A video frame scaled by swscale from its YUV planes lands where Pillow's resize of its RGB
    image does, with the same borders, and differs by a few levels inside (most at sharp colour
    edges, where the two filters meet the subsampled chroma differently)."""
    pytest.importorskip("av")
    frames = [
        f for f in open_sources([str(smooth_video(tmp_path / "clip.mp4", (96, 54)))]) if isinstance(f, Frame)
    ]
    fmt = InputFormat(input_size, letterbox)
    for frame in frames:
        assert isinstance(frame.picture, VideoPicture) and frame.size == (96, 54)
        got, placement = fmt.tensor(frame.picture)
        want, expected = fmt.tensor(frame.picture.frame.to_image())  # PyAV's own RGB conversion
        assert placement == expected and got.shape == want.shape and got.dtype == np.float32
        left, top = (int(v) for v in placement.offset)
        inner = (round(96 * placement.scale[0]), round(54 * placement.scale[1]))
        window = (slice(None), slice(top, top + inner[1]), slice(left, left + inner[0]))
        border = np.ones(got.shape, bool)
        border[window] = False
        np.testing.assert_array_equal(got[border], want[border])
        difference = np.abs(got[window] - want[window]) * 255
        assert difference.mean() < 6 and np.percentile(difference, 95) < 24  # of 255


def test_video_picture_full_image_is_pyav_s(tmp_path: Path) -> None:
    """The full-size image from the shared scaler is PyAV's own RGB conversion of the frame."""
    av = pytest.importorskip("av")
    path = smooth_video(tmp_path / "clip.mp4", (64, 48), frames=2)
    with av.open(str(path)) as container:
        decoded = list(container.decode(video=0))
    frames = [f for f in open_sources([str(path)]) if isinstance(f, Frame)]
    for frame, original in zip(frames, decoded, strict=True):
        assert isinstance(frame.picture, VideoPicture)
        assert frame.image is frame.image  # converted once
        np.testing.assert_array_equal(np.asarray(frame.image), np.asarray(original.to_image()))
