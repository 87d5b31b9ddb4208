"""Writing annotated frames as a video file with PyAV (the ``video`` extra).

A decoded video frame is annotated on a copy of its YUV 4:2:0 planes (:func:`annotate`) and
handed to the encoder as it is; a Pillow image is converted to YUV by the encoder's scaler."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from edgecnn.errors import InputError
from edgecnn.vision.draw import Yuv420Canvas, draw_on
from edgecnn.vision.sources import VideoPicture, codec_threads, import_av, plane_arrays

if TYPE_CHECKING:
    from PIL import Image

    from edgecnn.vision.detector import Detection

TIME_BASE = Fraction(1, 1000)
"""Frames are stamped in milliseconds from their source timestamps, so variable rates survive."""
CODECS = ("libx264", "h264", "mpeg4")


def encoder_options(codec: str) -> dict[str, str]:
    """x264's options: preset ultrafast, and threads as :func:`~edgecnn.vision.sources.codec_threads`.

    The encoder runs on the cores that inference keeps busy, so what it spends per frame is taken
    from inference; the annotated video is a by-product to look at the boxes. At x264's default
    quality (CRF 23) ultrafast needs about a third of veryfast's CPU per frame for files 2-3 times
    the size (superfast, in between, already loses most of veryfast's compression for two thirds
    of its CPU). Its output is H.264's Constrained Baseline profile (no CABAC, no B-frames), which
    every player decodes. x264's default threads (1.5 per core plus lookahead) spend about a third
    more CPU per frame than one thread."""
    if codec != "libx264":
        return {}
    return {"preset": "ultrafast", "threads": str(codec_threads())}


def annotate(picture: VideoPicture, detections: Sequence[Detection]) -> Any:
    """A new ``av.VideoFrame`` (YUV 4:2:0): ``picture`` with each detection drawn on it, for
    :meth:`VideoWriter.write`."""
    frame = picture.yuv420()
    draw_on(Yuv420Canvas(*plane_arrays(frame)), picture.size, detections)
    return frame


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

    def write(self, picture: Image.Image | Any, timestamp: float | None = None) -> None:
        """Append ``picture``, a Pillow image or an ``av.VideoFrame`` (e.g. from :func:`annotate`);
        ``timestamp`` (seconds) places it, else the frame rate does. The first picture sets the
        video's size, cut to even sides (as 4:2:0 needs)."""
        av = import_av()
        if self._stream is None:
            self._stream = self._container.add_stream(self._codec, rate=self.rate)
            self._stream.width = picture.width - picture.width % 2
            self._stream.height = picture.height - picture.height % 2
            self._stream.pix_fmt = "yuv420p"
            self._stream.codec_context.time_base = TIME_BASE
            self._stream.options = encoder_options(self._codec)
        if isinstance(picture, av.VideoFrame):
            frame = picture
        else:
            size = (self._stream.width, self._stream.height)
            rgb = picture if picture.mode == "RGB" else picture.convert("RGB")
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
