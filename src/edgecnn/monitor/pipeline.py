"""Seed 001's sample -> infer -> draw loop on a thread of its own, publishing each annotated frame
as the newest JPEG. Clients read whatever is newest when they are ready: a slow or stuck client
drops frames, and nothing a client does ever waits the loop."""

from __future__ import annotations

import io
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Protocol

from PIL import Image

from edgecnn.monitor.trace import TraceRecorder

if TYPE_CHECKING:
    from edgecnn.vision.detector import Detection
    from edgecnn.vision.sources import Frame, FrameError

FPS_WINDOW = 10  # frames the FPS figure averages over


class FrameDetector(Protocol):
    """What the loop needs of a detector (edgecnn.vision.Detector has it)."""

    def detect(self, image: Image.Image) -> list[Detection]: ...


FrameSource = Callable[[], Iterable["Frame | FrameError"]]
"""Opens the frames afresh (edgecnn.vision.sources.open_sources with its arguments bound)."""

DrawDetections = Callable[[Image.Image, Sequence["Detection"]], Image.Image]


@dataclass(frozen=True)
class FrameStats:
    """What the page shows of the newest frame."""

    seq: int  # frames published so far
    frame: int  # index in its source
    source: str
    detections: int
    inference_ms: float
    frame_ms: float  # decode to published: inference, drawing and JPEG encoding
    fps: float  # frames published per second, over the last FPS_WINDOW frames
    errors: int  # unreadable frames skipped so far
    dropped: int  # video frames skipped because inference ran behind their timestamps

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class FramePacer:
    """Holds timed frames (videos) to their timestamps, as a camera delivers them, and drops the
    ones already late by a frame interval or more (a slow consumer of a camera loses frames too);
    untimed frames (images) pass at once. A timestamp going back (a looped video) restarts the clock."""

    def __init__(self, sleep: Callable[[float], object]) -> None:
        self.sleep = sleep
        self._origin: tuple[float, float] | None = None  # (clock, timestamp) of the clock's start
        self._last: float | None = None

    def due(self, timestamp: float | None) -> bool:
        """Waits until the frame is due; False when it is too late to show."""
        if timestamp is None:
            return True
        now = time.perf_counter()
        interval = timestamp - self._last if self._last is not None and timestamp > self._last else 0.0
        if self._origin is None or self._last is None or timestamp < self._last:
            self._origin = (now, timestamp)
        self._last = timestamp
        target = self._origin[0] + timestamp - self._origin[1]
        if target > now:
            self.sleep(target - now)
            return True
        return now - target < max(interval, 1e-3)


class LatestFrame:
    """The newest annotated JPEG and its stats, replaced under a lock; ``on_publish`` callbacks
    run on the loop's thread and must return at once (the server's schedules a wake-up)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.jpeg: bytes | None = None
        self.stats: FrameStats | None = None
        self.on_publish: list[Callable[[], None]] = []

    def publish(self, jpeg: bytes, stats: FrameStats) -> None:
        with self._lock:
            self.jpeg, self.stats = jpeg, stats
        for callback in self.on_publish:
            callback()

    def latest(self) -> tuple[bytes | None, FrameStats | None]:
        with self._lock:
            return self.jpeg, self.stats


class InferenceLoop:
    """Runs detector over the frames until ``stop()`` or the source ends; ``failure`` keeps an
    error that ended it early (the monitor reports it rather than losing it on a thread)."""

    def __init__(
        self,
        detector: FrameDetector,
        frames: FrameSource,
        board: LatestFrame,
        recorder: TraceRecorder,
        draw: DrawDetections,
        jpeg_quality: int = 80,
    ) -> None:
        self.detector = detector
        self.frames = frames
        self.board = board
        self.recorder = recorder
        self.draw = draw
        self.jpeg_quality = jpeg_quality
        self.failure: BaseException | None = None
        self.ended = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="edgecnn-monitor-loop", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Asks the loop to stop after the frame in hand and waits for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # kept for the monitor to raise on its own thread
            self.failure = exc
        finally:
            self.ended.set()

    def _loop(self) -> None:
        from edgecnn.vision.sources import FrameError

        published: deque[float] = deque(maxlen=FPS_WINDOW)
        pacer = FramePacer(self._stop.wait)
        seq = errors = dropped = 0
        for item in self.frames():
            if self._stop.is_set():
                return
            if isinstance(item, FrameError):
                errors += 1
                self.recorder.event("frame_error", item.index)
                continue
            if not pacer.due(item.timestamp):
                dropped += 1
                continue
            if self._stop.is_set():
                return
            started = time.perf_counter()
            self.recorder.event("frame", item.index)
            self.recorder.event("inference_start", item.index)
            detections = self.detector.detect(item.image)
            inference_ms = (time.perf_counter() - started) * 1e3
            self.recorder.event("inference_end", item.index, inference_ms)
            jpeg = self._encode(self.draw(item.image, detections))
            now = time.perf_counter()
            published.append(now)
            seq += 1
            self.board.publish(
                jpeg,
                FrameStats(
                    seq=seq,
                    frame=item.index,
                    source=str(item.source),
                    detections=len(detections),
                    inference_ms=inference_ms,
                    frame_ms=(now - started) * 1e3,
                    fps=(len(published) - 1) / (now - published[0]) if len(published) > 1 else 0.0,
                    errors=errors,
                    dropped=dropped,
                ),
            )

    def _encode(self, image: Image.Image) -> bytes:
        buffer = io.BytesIO()
        image.convert("RGB").save(buffer, format="JPEG", quality=self.jpeg_quality)
        return buffer.getvalue()
