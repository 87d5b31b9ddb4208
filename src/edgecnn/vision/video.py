"""Writing annotated frames as a video file with PyAV (the ``video`` extra)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from edgecnn.errors import InputError
from edgecnn.vision.sources import codec_threads, import_av

if TYPE_CHECKING:
    from PIL import Image

TIME_BASE = Fraction(1, 1000)
"""Frames are stamped in milliseconds from their source timestamps, so variable rates survive."""
CODECS = ("libx264", "h264", "mpeg4")


def encoder_options(codec: str) -> dict[str, str]:
    """x264's options: preset veryfast, as its default spends about twice the CPU per frame for no
    smaller file on annotated frames; threads as :func:`~edgecnn.vision.sources.codec_threads`
    (x264's default, 1.5 per core plus lookahead, spends about a third more CPU per frame)."""
    if codec != "libx264":
        return {}
    return {"preset": "veryfast", "threads": str(codec_threads())}


class VideoWriter:
    """An H.264 (or MPEG-4 part 2 where FFmpeg lacks an H.264 encoder) MP4 file, written frame by
    frame; :meth:`close` (or leaving the ``with`` block) flushes the encoder and finishes the file."""

    def __init__(self, path: str | Path, rate: float = 30.0) -> None:
        av = import_av()
        codec = next((c for c in CODECS if c in av.codecs_available), None)
        if codec is None:
            raise InputError(f"this FFmpeg build has none of the video encoders {', '.join(CODECS)}")
        self.path = Path(path)
        self.rate = Fraction(rate).limit_denominator(1001)
        self._container: Any = av.open(str(self.path), mode="w")
        self._codec = codec
        self._stream: Any = None
        self._last_pts = -1
        self.frames = 0

    def write(self, image: Image.Image, timestamp: float | None = None) -> None:
        """Append ``image``; ``timestamp`` (seconds) places it, else the frame rate does."""
        av = import_av()
        if self._stream is None:
            self._stream = self._container.add_stream(self._codec, rate=self.rate)
            self._stream.width = image.width - image.width % 2  # yuv420p needs even sizes
            self._stream.height = image.height - image.height % 2
            self._stream.pix_fmt = "yuv420p"
            self._stream.codec_context.time_base = TIME_BASE
            self._stream.options = encoder_options(self._codec)
        size = (self._stream.width, self._stream.height)
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        frame = av.VideoFrame.from_image(rgb if rgb.size == size else rgb.crop((0, 0, *size)))
        seconds = timestamp if timestamp is not None else self.frames / float(self.rate)
        pts = max(round(seconds / TIME_BASE), self._last_pts + 1)
        frame.pts, frame.time_base = pts, TIME_BASE
        self._last_pts = pts
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        self.frames += 1

    def close(self) -> None:
        if self._stream is not None:
            for packet in self._stream.encode(None):
                self._container.mux(packet)
        self._container.close()

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
