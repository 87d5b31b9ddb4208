"""Drawing detections: outlines as Pillow draws rectangles, the same marks on a video frame's YUV
4:2:0 planes as on its RGB image, and annotated frames encoded and read back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw

from edgecnn.vision.detector import Detection
from edgecnn.vision.draw import RgbCanvas, class_colour, draw_detections, outline, to_yuv
from edgecnn.vision.sources import Frame, VideoPicture, open_sources, plane_arrays

av = pytest.importorskip("av")


@settings(max_examples=40, deadline=None)
@given(
    size=st.tuples(st.integers(1, 40), st.integers(1, 40)),
    corners=st.tuples(*(st.integers(0, 45) for _ in range(4))),
    width=st.integers(1, 6),
)
def test_outline_is_pillows_rectangle(
    size: tuple[int, int], corners: tuple[int, int, int, int], width: int
) -> None:
    x1, y1 = min(corners[0], corners[2]), min(corners[1], corners[3])
    x2, y2 = max(corners[0], corners[2]), max(corners[1], corners[3])
    assume(min(x2 - x1, y2 - y1) >= 2 * width)  # Pillow draws narrower boxes past their ends
    want = Image.new("RGB", size)
    ImageDraw.Draw(want).rectangle((x1, y1, x2, y2), outline=(200, 100, 50), width=width)
    canvas = RgbCanvas(np.zeros((size[1], size[0], 3), np.uint8))
    for side in outline((x1, y1, x2, y2), width):
        canvas.fill(side, (200, 100, 50))
    np.testing.assert_array_equal(canvas.pixels, np.asarray(want))


def yuv_picture(size: tuple[int, int], seed: int) -> VideoPicture:
    """A decoded-like yuv420p frame of mid-range noise (no colour is clipped on the way to RGB)."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(40, 210, (size[1], size[0], 3), dtype=np.uint8)
    return VideoPicture(av.VideoFrame.from_ndarray(pixels, format="rgb24").reformat(format="yuv420p"))


detections = st.lists(
    st.tuples(
        st.floats(0, 1),
        st.floats(0, 1),
        st.floats(0, 1),
        st.floats(0, 1),
        st.integers(0, 79),
        st.floats(0, 1),
    ),
    min_size=1,
    max_size=4,
)


def marks(size: tuple[int, int], found: list[tuple[float, ...]]) -> list[Detection]:
    """Detections from fractions of the image: (x, x', y, y', class, score)."""
    width, height = size
    return [
        Detection(
            (min(a, b) * width, min(c, d) * height, max(a, b) * width, max(c, d) * height),
            score,
            int(label),
            f"class{int(label)}",
        )
        for a, b, c, d, label, score in found
    ]


def both_ways(
    size: tuple[int, int], found: list[tuple[float, ...]], seed: int
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """The picture's RGB pixels before and after drawing on its RGB image, and its planes before
    and after drawing on its YUV planes (odd sides cut off)."""
    from edgecnn.vision.video import annotate

    picture = yuv_picture(size, seed)
    boxes = marks(size, found)
    frame = annotate(picture, boxes)
    assert (frame.width, frame.height) == (size[0] - size[0] % 2, size[1] - size[1] % 2)
    assert frame.format.name == "yuv420p"
    rgb = np.asarray(picture.to_image())
    drawn = np.asarray(draw_detections(picture.to_image(), boxes))[: frame.height, : frame.width]
    return rgb[: frame.height, : frame.width], drawn, plane_arrays(picture.frame), plane_arrays(frame)


@settings(max_examples=30, deadline=None)
@given(size=st.tuples(st.integers(8, 120), st.integers(8, 90)), found=detections, seed=st.integers(0, 2**16))
def test_yuv_marks_are_the_rgb_marks(
    size: tuple[int, int], found: list[tuple[float, ...]], seed: int
) -> None:
    """Every pixel drawn on the RGB image has that colour's luma on the annotated YUV frame and every
    other pixel keeps the decoded frame's; a chroma sample whose 2x2 pixels are all drawn in one
    colour holds that colour's, one whose pixels are all untouched keeps the decoded frame's."""
    rgb, drawn, original, (luma, cb, cr) = both_ways(size, found, seed)
    h, w = luma.shape
    mask = (drawn != rgb).any(axis=2)
    want = np.clip(np.rint(to_yuv(drawn)), 0, 255)
    np.testing.assert_array_equal(luma[mask], want[..., 0][mask])
    np.testing.assert_array_equal(luma[~mask], original[0][:h, :w][~mask])
    blocks = mask.reshape(h // 2, 2, w // 2, 2)
    pixels = drawn.reshape(h // 2, 2, w // 2, 2, 3).astype(int)
    uniform = blocks.all(axis=(1, 3)) & (pixels == pixels[:, :1, :, :1]).all(axis=(1, 3, 4))
    empty = ~blocks.any(axis=(1, 3))
    for plane, ours in ((1, cb), (2, cr)):
        np.testing.assert_array_equal(ours[uniform], want[0::2, 0::2, plane][uniform])
        np.testing.assert_array_equal(ours[empty], original[plane][: h // 2, : w // 2][empty])


def test_label_chroma_is_the_mean_of_its_pixels() -> None:
    """A label (black text on the class colour) on a YUV frame: each chroma sample it covers is the
    mean of its 2x2 pixels' as drawn on the RGB image."""
    rgb, drawn, _, (luma, cb, cr) = both_ways((90, 60), [(0.2, 0.7, 0.5, 0.9, 5, 0.5)], 7)
    h, w = luma.shape
    full = (drawn != rgb).any(axis=2).reshape(h // 2, 2, w // 2, 2).all(axis=(1, 3))
    mean = to_yuv(drawn).reshape(h // 2, 2, w // 2, 2, 3).mean(axis=(1, 3))
    assert full.sum() > 20  # the label's blocks and the outline's
    for ours, channel in ((cb, 1), (cr, 2)):
        np.testing.assert_allclose(ours[full], mean[..., channel][full], atol=0.51)


def test_other_pixel_formats_and_odd_sides_become_even_yuv420() -> None:
    colour = (180, 60, 90)
    picture = VideoPicture(av.VideoFrame.from_image(Image.new("RGB", (33, 21), colour)))
    frame = picture.yuv420()
    assert (frame.width, frame.height, frame.format.name) == (32, 20, "yuv420p")
    back = frame.to_ndarray(format="rgb24").astype(int)
    assert np.abs(back - colour).max() <= 3


def test_annotated_video_reads_back_frame_by_frame(tmp_path: Path) -> None:
    """Annotated frames of a decoded video, encoded and decoded again: every frame, its timestamp,
    and the box's outline in its class colour where it was drawn."""
    from edgecnn.vision.video import VideoWriter, annotate

    source = tmp_path / "source.mp4"
    with VideoWriter(source, rate=10) as writer:
        for index in range(4):
            writer.write(Image.new("RGB", (96, 64), (60 + 20 * index, 90, 90)), index / 10)
    box = Detection((20.0, 24.0, 70.0, 58.0), 0.9, 3, "cat")
    target = tmp_path / "annotated.mp4"
    with VideoWriter(target, rate=10) as writer:
        for frame in open_sources([str(source)]):
            assert isinstance(frame, Frame) and isinstance(frame.picture, VideoPicture)
            writer.write(annotate(frame.picture, [box]), frame.timestamp)
    frames = [f for f in open_sources([str(target)]) if isinstance(f, Frame)]
    assert [f.index for f in frames] == [0, 1, 2, 3]
    assert [f.timestamp for f in frames] == pytest.approx([0.0, 0.1, 0.2, 0.3])
    colour = np.array(class_colour(3))
    for frame in frames:
        pixels = np.asarray(frame.image).astype(int)
        assert np.abs(pixels[40, 20:22] - colour).max() <= 40  # the left side, 2 pixels wide at 96x64
        assert np.abs(pixels[40, 40] - colour).max() > 60  # inside the box: the background
