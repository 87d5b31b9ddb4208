"""Frames from images, folders, videos, a camera or a stream of paths on stdin.

Images are decoded with Pillow; videos and cameras with PyAV (the ``video`` extra): it binds
FFmpeg's own demuxers and decoders, so every container and codec FFmpeg reads works, frames come
with their presentation timestamps, and V4L2 cameras open through the same call. OpenCV would add
a 60 MB wheel and lose the timestamps of variable-rate files. Unreadable inputs become
:class:`FrameError` items so that a caller can report them and go on.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgecnn.devices import available_cores
from edgecnn.errors import EdgeCNNError, InputError
from edgecnn.vision.preprocess import open_image

if TYPE_CHECKING:
    from PIL import Image

IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}
)
VIDEO_SUFFIXES = frozenset({".mp4", ".avi", ".mkv", ".mov", ".webm", ".m4v", ".mpg", ".mpeg", ".wmv", ".flv"})
STDIN = "-"
VIDEO_EXTRA = "pip install 'edgecnn[video]'"


class FrameScaler:
    """One swscale context converting a stream's frames, reused from frame to frame: building the
    context costs more than converting a frame with it. A lock keeps it to one thread at a time."""

    def __init__(self) -> None:
        from av.video.reformatter import VideoReformatter

        self._reformatter = VideoReformatter()
        self._lock = threading.Lock()

    def convert(self, frame: Any, size: tuple[int, int], format: str) -> Any:
        """A new ``av.VideoFrame``: ``frame`` in pixel ``format``, scaled (bilinear) to ``size``
        (width, height)."""
        width, height = size
        with self._lock:
            return self._reformatter.reformat(
                frame, width=width, height=height, format=format, interpolation="BILINEAR"
            )

    def rgb(self, frame: Any, size: tuple[int, int]) -> np.ndarray:
        """[height, width, 3] 8-bit RGB pixels of an ``av.VideoFrame`` scaled (bilinear) to ``size``
        (width, height)."""
        return np.asarray(self.convert(frame, size, "rgb24").to_ndarray())


def plane_arrays(frame: Any) -> list[np.ndarray]:
    """Views of an 8-bit planar ``av.VideoFrame``'s planes as [height, width] arrays (the rows'
    padding cut off), writable where the frame is."""
    return [
        np.frombuffer(p, np.uint8, count=p.line_size * p.height).reshape(p.height, p.line_size)[:, : p.width]
        for p in frame.planes
    ]


class VideoPicture:
    """A decoded video frame in the decoder's own pixel format (YUV for most codecs).

    Converting it to RGB is one swscale pass straight to the size a caller asks for, so a model's
    input needs no full-size RGB copy nor a second resize; the full-size image is made only for
    those who ask for it, and an annotated video is drawn on a copy of the YUV planes
    (:meth:`yuv420`). ``scalers`` (for other sizes, for the full size) are shared by the frames of
    one stream, one of each per thread that converts."""

    def __init__(self, frame: Any, scalers: tuple[FrameScaler, FrameScaler] | None = None) -> None:
        self.frame = frame  # an av.VideoFrame
        self._scaled, self._full = scalers or (FrameScaler(), FrameScaler())

    @property
    def size(self) -> tuple[int, int]:
        """(width, height)."""
        return int(self.frame.width), int(self.frame.height)

    def rgb(self, size: tuple[int, int]) -> np.ndarray:
        """[height, width, 3] 8-bit RGB pixels scaled (bilinear) to ``size`` (width, height)."""
        return self._scaled.rgb(self.frame, size)

    def to_image(self) -> Image.Image:
        """The full-size RGB image."""
        from PIL import Image

        return Image.fromarray(self._full.rgb(self.frame, self.size))

    def yuv420(self) -> Any:
        """A new ``av.VideoFrame`` of this picture in 8-bit YUV 4:2:0, the pixel format of H.264
        files, for drawing on and encoding: a copy of the decoder's planes (converted first if the
        decoder's format differs), with an odd last row or column cut off (4:2:0 needs even sides)."""
        av = import_av()
        width, height = self.size
        source = self.frame
        if source.format.name != "yuv420p":
            source = self._full.convert(source, self.size, "yuv420p")
        copy = av.VideoFrame(width - width % 2, height - height % 2, "yuv420p")
        for target, plane in zip(plane_arrays(copy), plane_arrays(source)):
            target[...] = plane[: target.shape[0], : target.shape[1]]
        return copy


@dataclass(frozen=True)
class Frame:
    """One decoded image: its pixels (a Pillow image, or a video frame still in the decoder's
    format), where it came from and when."""

    picture: Image.Image | VideoPicture  # RGB when a Pillow image
    source: str  # file path, "camera:0", or the path read from stdin
    index: int  # frame index within a video or camera stream; 0 for an image
    timestamp: float | None  # seconds within a video; None for images

    @cached_property
    def image(self) -> Image.Image:
        """The frame as a full-size RGB Pillow image (converted from a video frame on first use)."""
        return self.picture.to_image() if isinstance(self.picture, VideoPicture) else self.picture

    @property
    def size(self) -> tuple[int, int]:
        """(width, height), without converting a video frame."""
        picture = self.picture
        return picture.size if isinstance(picture, VideoPicture) else (picture.width, picture.height)


@dataclass(frozen=True)
class FrameError:
    """An input that could not be decoded: reported and skipped unless the caller is strict."""

    source: str
    index: int
    message: str


Item = Frame | FrameError


def codec_threads() -> int:
    """Threads for FFmpeg's decoders and encoders: one per core beyond the first. Their threads run
    beside inference's, on the same cores, and their default (about one or more per core) costs
    more CPU per frame, to keep its threads in step, than the overlap gains."""
    return max(1, available_cores() - 1)


def import_av() -> Any:
    """PyAV, or an error naming the extra that installs it."""
    try:
        import av
    except ImportError:
        raise EdgeCNNError(f"video files and cameras need PyAV: {VIDEO_EXTRA}") from None
    return av


def is_video(path: str | Path) -> bool:
    return Path(path).suffix.lower() in VIDEO_SUFFIXES


def camera_device(camera: str) -> str:
    """``"0"`` -> ``/dev/video0``; a device path is kept as it is."""
    return f"/dev/video{camera}" if camera.isdigit() else camera


def expand(sources: Sequence[str]) -> list[str]:
    """Source arguments -> the files they name: folders recursively (sorted), others as given.
    A missing path is kept, to be reported as a :class:`FrameError` when read."""
    files: list[str] = []
    for source in sources:
        path = Path(source)
        if source != STDIN and path.is_dir():
            files.extend(
                str(p)
                for p in sorted(path.rglob("*"))
                if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES | VIDEO_SUFFIXES
            )
        else:
            files.append(source)
    return files


def video_frame_count(path: str) -> int | None:
    """Frames the container declares for its first video stream, or None when unknown."""
    av = import_av()
    try:
        with av.open(path) as container:
            frames = int(container.streams.video[0].frames)
    except (av.error.FFmpegError, IndexError, OSError):
        return None
    return frames or None


def read_image(path: str) -> Item:
    """An image file as a :class:`Frame`, or a :class:`FrameError` saying why not."""
    from PIL import UnidentifiedImageError

    try:
        with open_image(path) as img:
            return Frame(img.convert("RGB"), path, 0, None)
    except FileNotFoundError:
        return FrameError(path, 0, "file not found")
    except InputError as exc:  # a decompression bomb
        return FrameError(path, 0, str(exc))
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        return FrameError(path, 0, f"not an image Pillow can read ({exc})")


def read_video(
    path: str, *, source: str | None = None, options: dict[str, str] | None = None
) -> Iterator[Item]:
    """The frames of a video file (or a device opened with ``options``) in order.

    A frame whose packet fails to decode is reported and skipped; a container that cannot be
    opened at all is one :class:`FrameError`."""
    av = import_av()
    name = source or path
    try:
        container = av.open(path, options=options or {}, format="v4l2" if options is not None else None)
    except (av.error.FFmpegError, OSError) as exc:
        yield FrameError(name, 0, f"cannot open video ({exc})")
        return
    with container:
        if not container.streams.video:
            yield FrameError(name, 0, "no video stream")
            return
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        stream.thread_count = codec_threads()
        scalers = FrameScaler(), FrameScaler()
        index = 0
        for packet in container.demux(stream):
            try:
                decoded = packet.decode()
            except av.error.FFmpegError as exc:
                yield FrameError(name, index, f"corrupt frame ({exc})")
                index += 1
                continue
            for frame in decoded:
                timestamp = float(frame.pts * stream.time_base) if frame.pts is not None else None
                yield Frame(VideoPicture(frame, scalers), name, index, timestamp)
                index += 1


def read_camera(camera: str) -> Iterator[Item]:
    """Frames of a V4L2 camera (an index such as ``"0"`` or a device path) until it stops."""
    device = camera_device(camera)
    return read_video(device, source=f"camera:{camera}", options={})


def _read_one(path: str) -> Iterator[Item]:
    if is_video(path):
        yield from read_video(path)
    else:
        yield read_image(path)


def _stdin_paths(lines: Iterable[str]) -> Iterator[str]:
    for line in lines:
        path = line.strip()
        if path:
            yield path


def open_sources(sources: Sequence[str], *, camera: str | None = None, loop: bool = False) -> Iterator[Item]:
    """Every frame of ``sources`` in order, then of ``camera``: image files, folders (recursive,
    sorted), video files, and ``"-"`` for image or video paths read from stdin, one per line.

    ``loop=True`` repeats the files and folders forever (stdin and a camera are read once: they
    do not end or cannot be replayed). Decoding happens as the iterator is advanced."""
    if not sources and camera is None:
        raise InputError("no source given: pass image, folder or video paths, '-' for stdin, or a camera")
    while True:
        produced = False
        for source in sources:
            if source == STDIN:
                continue
            for path in expand([source]):
                for item in _read_one(path):
                    produced = produced or isinstance(item, Frame)
                    yield item
        if not loop or not produced:
            break
    if STDIN in sources:
        for path in _stdin_paths(sys.stdin):
            yield from _read_one(path)
    if camera is not None:
        yield from read_camera(camera)
