"""Writes `edgecnn monitor`'s bundled sample video: the bundled face sample (BSD-3, Shiqi Yu's
SimpleCNN repository, like the classifier) gliding over a background drawn here with Pillow, with
the background sample as a second, non-face patch. 320x240, 10 fps, 6 s, H.264 via PyAV.

    .venv/bin/python lab/monitor_sample_video.py [OUT]   # default: the packaged path
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from pathlib import Path

import av
from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "src/edgecnn/data/simplecnn/samples"
OUT = ROOT / "src/edgecnn/data/monitor/sample.mp4"
WIDTH, HEIGHT, FPS, SECONDS = 320, 240, 10, 6


def background() -> Image.Image:
    """A calm gradient with a few shapes, so that the detector has something that is not a face."""
    image = Image.new("RGB", (WIDTH, HEIGHT))
    draw = ImageDraw.Draw(image)
    for y in range(HEIGHT):
        shade = 40 + y * 60 // HEIGHT
        draw.line([(0, y), (WIDTH, y)], fill=(shade, shade + 20, shade + 50))
    draw.rectangle([230, 150, 310, 230], fill=(90, 120, 80))
    draw.ellipse([20, 170, 80, 230], fill=(140, 100, 70))
    return image


def frame(index: int, base: Image.Image, face: Image.Image, patch: Image.Image) -> Image.Image:
    """Frame ``index``: the face on a Lissajous path, the background patch sliding the other way."""
    t = index / (FPS * SECONDS)
    image = base.copy()
    patch_x = int((WIDTH - patch.width) * (1 - t))
    image.paste(patch, (patch_x, 4))
    x = int((WIDTH - face.width) * (0.5 + 0.5 * math.sin(2 * math.pi * t)))
    y = int((HEIGHT - face.height) * (0.5 + 0.5 * math.sin(4 * math.pi * t)))
    image.paste(face, (x, y))
    return image


def main(out: Path) -> None:
    face = Image.open(SAMPLES / "face.jpg").convert("RGB")
    patch = Image.open(SAMPLES / "bg.jpg").convert("RGB").resize((72, 72))
    base = background()
    out.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(out), "w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.time_base = Fraction(1, FPS)
        stream.options = {"crf": "26", "preset": "veryslow"}
        for index in range(FPS * SECONDS):
            video_frame = av.VideoFrame.from_image(frame(index, base, face, patch))
            video_frame.pts = index
            container.mux(stream.encode(video_frame))
        container.mux(stream.encode(None))
    print(f"{out}: {out.stat().st_size / 1024:.0f} KiB, {FPS * SECONDS} frames")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
