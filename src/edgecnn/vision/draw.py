"""Annotated images: boxes, labels and scores drawn with Pillow."""

from __future__ import annotations

import colorsys
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image, ImageFont

    from edgecnn.vision.detector import Detection


def class_colour(class_id: int) -> tuple[int, int, int]:
    """A saturated colour per class, spread around the hue circle (golden-ratio steps)."""
    r, g, b = colorsys.hsv_to_rgb((class_id * 0.618034) % 1.0, 0.85, 1.0)
    return round(r * 255), round(g * 255), round(b * 255)


@lru_cache(maxsize=8)
def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


def draw_detections(image: Image.Image, detections: Sequence[Detection]) -> Image.Image:
    """A copy of ``image`` (RGB) with each detection's box and ``label score`` drawn on it; line
    width and font size follow the image size so that labels stay legible."""
    from PIL import ImageDraw

    canvas = image.convert("RGB")
    draw = ImageDraw.Draw(canvas)
    line = max(2, round(min(canvas.size) / 200))
    font = _font(max(12, round(min(canvas.size) / 30)))
    for detection in detections:
        colour = class_colour(detection.class_id)
        x1, y1, x2, y2 = detection.box
        draw.rectangle((x1, y1, x2, y2), outline=colour, width=line)
        text = f"{detection.label} {detection.score:.2f}"
        left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
        height = bottom - top + 2 * line
        label_y = y1 - height if y1 - height >= 0 else y1
        draw.rectangle((x1, label_y, x1 + right - left + 2 * line, label_y + height), fill=colour)
        draw.text((x1 + line, label_y + line - top), text, fill=(0, 0, 0), font=font)
    return canvas
