"""InputFormat.tensor (one pass into the output window) against a plain numpy transcription."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from edgecnn.vision.detector import InputFormat


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
