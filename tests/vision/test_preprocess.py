"""Image preprocessing: resize, channel order, scale/mean/std, layout; and its argument checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edgecnn.errors import InputError
from edgecnn.vision.preprocess import Preprocess, load_inputs, parse_floats, parse_shape, parse_size


@pytest.fixture
def image_file(tmp_path: Path) -> tuple[Path, np.ndarray]:
    pixels = np.random.default_rng(1).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    path = tmp_path / "img.png"
    Image.fromarray(pixels).save(path)
    return path, pixels


def test_scale_mean_std_and_bgr_order(image_file: tuple[Path, np.ndarray]) -> None:
    path, pixels = image_file
    pre = Preprocess(channel_order="bgr", scale=0.5, mean=(1, 2, 3), std=(2, 4, 8))
    x = pre.image(path)
    expected = (pixels[:, :, ::-1].astype(np.float32) * 0.5 - [1, 2, 3]) / [2, 4, 8]
    assert x.shape == (1, 3, 5, 7) and x.dtype == np.float32
    np.testing.assert_allclose(x[0], expected.transpose(2, 0, 1), rtol=1e-6)


def test_nhwc_grayscale_and_resize(image_file: tuple[Path, np.ndarray]) -> None:
    path, _ = image_file
    assert Preprocess(layout="nhwc").image(path).shape == (1, 5, 7, 3)
    assert Preprocess(grayscale=True).image(path).shape == (1, 1, 5, 7)
    assert Preprocess(size=(16, 9)).image(path).shape == (1, 3, 16, 9)


def test_npy_inputs_pass_through(tmp_path: Path, image_file: tuple[Path, np.ndarray]) -> None:
    array = np.arange(6, dtype=np.int64).reshape(2, 3)
    np.save(tmp_path / "a.npy", array)
    loaded = load_inputs([tmp_path / "a.npy", image_file[0]], Preprocess())
    np.testing.assert_array_equal(loaded[0], array)
    assert loaded[1].shape == (1, 3, 5, 7)


def test_parsers() -> None:
    assert parse_size("224") == (224, 224)
    assert parse_size("120x160") == (120, 160)
    assert parse_shape("1x3x8x8") == (1, 3, 8, 8)
    assert parse_floats("0.5,1", "--mean") == (0.5, 1.0)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: parse_size("1x2x3"), "size must look like HxW"),
        (lambda: parse_size("0x4"), "size dimensions must be positive"),
        (lambda: parse_shape("1x?"), "shape must look like"),
        (lambda: parse_floats("a,b", "--std"), "--std must be comma-separated numbers"),
        (lambda: Preprocess(channel_order="gbr"), "channel order"),
        (lambda: Preprocess(mean=(1, 2)), "mean needs 1 or 3 values"),
        (lambda: Preprocess(grayscale=True, std=(1, 2, 3)), "std needs 1 or 1 values"),
        (lambda: Preprocess(size=(0, 3)), "size must be two positive integers"),
    ],
)
def test_bad_arguments(make: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        make()  # type: ignore[operator]
