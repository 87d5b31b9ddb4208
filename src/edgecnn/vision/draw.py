"""Annotated images and video frames: boxes, labels and scores.

One routine draws on the pixel planes of either kind: a Pillow image's RGB pixels, or a decoded
video frame's YUV 4:2:0 planes, so that a frame is annotated and encoded without a round trip
through a full-size RGB image (two colour conversions of every pixel, which cost more than the
drawing). Box outlines are filled rectangles; a label (text in black on the class colour) is
joined from its class name and score, each rendered once per size with Pillow's font, then
pasted."""

from __future__ import annotations

import colorsys
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from PIL import Image, ImageFont

    from edgecnn.vision.detector import Detection

Rect = tuple[int, int, int, int]
"""x0, y0, x1, y1 in pixels, the ends excluded."""

BT601 = np.array(
    [[65.481, 128.553, 24.966], [-37.797, -74.203, 112.0], [112.0, -93.786, -18.214]], np.float32
) / np.float32(255)
"""RGB (0..255) -> Y'CbCr, ITU-R BT.601 limited range: what FFmpeg's scaler makes of RGB by default,
so colours drawn on a video frame match those drawn on an image and encoded."""
BT601_OFFSET = np.array([16.0, 128.0, 128.0], np.float32)


def class_colour(class_id: int) -> tuple[int, int, int]:
    """A saturated colour per class, spread around the hue circle (golden-ratio steps)."""
    r, g, b = colorsys.hsv_to_rgb((class_id * 0.618034) % 1.0, 0.85, 1.0)
    return round(r * 255), round(g * 255), round(b * 255)


def to_yuv(rgb: np.ndarray | tuple[int, int, int]) -> np.ndarray:
    """[..., 3] RGB -> [..., 3] float32 Y'CbCr (BT.601 limited range), not rounded."""
    return np.asarray(rgb, np.float32) @ BT601.T + BT601_OFFSET


@lru_cache(maxsize=8)
def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


@dataclass(frozen=True)
class Label:
    """A detection's label: its ``words`` (e.g. ``("person ", "0.87")``) in black on ``colour``
    with ``margin`` pixels around them."""

    words: tuple[str, ...]
    colour: tuple[int, int, int]
    font_size: int
    margin: int


@lru_cache(maxsize=512)
def text_mask(text: str, font_size: int) -> np.ndarray:
    """[ascent + descent, advance] coverage (0..255) of ``text`` rendered with Pillow's font, from
    the line's ascender down. Rendering is the costliest part of drawing a label, and a label is
    a class name and a score, each drawn again and again: they are rendered once, then joined."""
    from PIL import Image, ImageDraw, ImageFont

    font = _font(font_size)
    if isinstance(font, ImageFont.FreeTypeFont):
        ascent, descent = font.getmetrics()
        height = ascent + descent
    else:  # Pillow built without FreeType: its fixed bitmap font
        height = int(font.getbbox("Ag|")[3])
    image = Image.new("L", (max(1, math.ceil(font.getlength(text))), height))
    ImageDraw.Draw(image).text((0, 0), text, fill=255, font=font)
    mask = np.array(image)
    mask.flags.writeable = False
    return mask


@lru_cache(maxsize=256)
def label_patch(label: Label) -> np.ndarray:
    """[height, width, 3] RGB pixels of ``label``; both sides even, so that on a 4:2:0 frame it
    covers whole chroma samples. Read-only (cached)."""
    mask = np.hstack([text_mask(word, label.font_size) for word in label.words])
    width = mask.shape[1] + 2 * label.margin + 1
    height = mask.shape[0] + 2 * label.margin + 1
    pixels = np.empty((height + height % 2, width + width % 2, 3), np.uint8)
    pixels[...] = label.colour
    window = pixels[label.margin : label.margin + mask.shape[0], label.margin : label.margin + mask.shape[1]]
    # black ink over the colour by the text's coverage, as Pillow blends text
    window[...] = np.rint(window * ((255 - mask[:, :, None]) / 255))
    pixels.flags.writeable = False
    return pixels


@lru_cache(maxsize=256)
def yuv420_label(label: Label) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``label``'s patch as 8-bit Y', Cb, Cr planes, each chroma sample the mean of its 2x2 pixels."""
    yuv = to_yuv(label_patch(label))
    chroma = (yuv[0::2, 0::2, 1:] + yuv[1::2, 0::2, 1:] + yuv[0::2, 1::2, 1:] + yuv[1::2, 1::2, 1:]) / 4
    return _levels(yuv[:, :, 0]), _levels(chroma[:, :, 0]), _levels(chroma[:, :, 1])


@lru_cache(maxsize=64)
def yuv_colour(colour: tuple[int, int, int]) -> tuple[int, int, int]:
    """An RGB colour's 8-bit Y', Cb, Cr levels."""
    y, cb, cr = (int(v) for v in _levels(to_yuv(colour)))
    return y, cb, cr


def _levels(values: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


class Canvas(Protocol):
    """Pixel planes that detections are drawn on."""

    def fill(self, rect: Rect, colour: tuple[int, int, int]) -> None:
        """Paint ``rect`` (clipped to the picture) in an RGB ``colour``."""

    def paste(self, x: int, y: int, label: Label) -> None:
        """Copy ``label``'s patch with its top-left corner at even ``x``, ``y``, clipped."""


class RgbCanvas:
    """[height, width, 3] 8-bit RGB pixels."""

    def __init__(self, pixels: np.ndarray) -> None:
        self.pixels = pixels

    def fill(self, rect: Rect, colour: tuple[int, int, int]) -> None:
        x0, y0, x1, y1 = rect
        self.pixels[max(0, y0) : y1, max(0, x0) : x1] = colour

    def paste(self, x: int, y: int, label: Label) -> None:
        _paste(self.pixels, x, y, label_patch(label))


class Yuv420Canvas:
    """The Y', Cb and Cr planes of a 4:2:0 picture (chroma at half the width and height), 8-bit,
    BT.601 limited range. A fill covers every chroma sample that its rectangle touches."""

    def __init__(self, luma: np.ndarray, cb: np.ndarray, cr: np.ndarray) -> None:
        self.planes = luma, cb, cr

    def fill(self, rect: Rect, colour: tuple[int, int, int]) -> None:
        x0, y0, x1, y1 = max(0, rect[0]), max(0, rect[1]), rect[2], rect[3]
        luma, cb, cr = self.planes
        levels = yuv_colour(colour)
        luma[y0:y1, x0:x1] = levels[0]
        chroma = (slice(y0 // 2, (y1 + 1) // 2), slice(x0 // 2, (x1 + 1) // 2))
        cb[chroma] = levels[1]
        cr[chroma] = levels[2]

    def paste(self, x: int, y: int, label: Label) -> None:
        luma, cb, cr = yuv420_label(label)
        _paste(self.planes[0], x, y, luma)
        _paste(self.planes[1], x // 2, y // 2, cb)
        _paste(self.planes[2], x // 2, y // 2, cr)


def _paste(plane: np.ndarray, x: int, y: int, patch: np.ndarray) -> None:
    window = plane[y : y + patch.shape[0], x : x + patch.shape[1]]
    window[...] = patch[: window.shape[0], : window.shape[1]]


def outline(box: Rect, width: int) -> list[Rect]:
    """The four sides of a box outline ``width`` pixels thick, inside ``box`` (x1, y1, x2, y2
    with the ends included): Pillow's rectangle, which draws boxes narrower than twice the width
    past their ends, where this fills them."""
    x1, y1, x2, y2 = box
    return [
        (x1, y1, x2 + 1, y1 + width),
        (x1, y2 - width + 1, x2 + 1, y2 + 1),
        (x1, y1, x1 + width, y2 + 1),
        (x2 - width + 1, y1, x2 + 1, y2 + 1),
    ]


def draw_on(canvas: Canvas, size: tuple[int, int], detections: Sequence[Detection]) -> None:
    """Each detection's box and ``label score`` on ``canvas`` of ``size`` (width, height); line
    width and font size follow the size so that labels stay legible."""
    line = max(2, round(min(size) / 200))
    font_size = max(12, round(min(size) / 30))
    for detection in detections:
        colour = class_colour(detection.class_id)
        x1, y1, x2, y2 = (int(v) for v in detection.box)
        for side in outline((x1, y1, x2, y2), line):
            canvas.fill(side, colour)
        label = Label((f"{detection.label} ", f"{detection.score:.2f}"), colour, font_size, line)
        height = label_patch(label).shape[0]
        label_y = y1 - height if y1 >= height else y1
        canvas.paste(x1 - x1 % 2, label_y - label_y % 2, label)


def draw_detections(image: Image.Image, detections: Sequence[Detection]) -> Image.Image:
    """A copy of ``image`` (as RGB) with each detection's box and ``label score`` drawn on it."""
    from PIL import Image

    pixels = np.array(image if image.mode == "RGB" else image.convert("RGB"))
    draw_on(RgbCanvas(pixels), image.size, detections)
    return Image.fromarray(pixels)
