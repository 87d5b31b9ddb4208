"""`edgecnn detect`: objects (or faces) in images, folders, videos, a camera or paths on stdin."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from edgecnn.cli.console import console, error_console, headline
from edgecnn.errors import InputError
from edgecnn.vision.detector import Detection, Detector, Inferred
from edgecnn.vision.draw import draw_detections
from edgecnn.vision.faces import DEFAULT_SCALES
from edgecnn.vision.pipeline import FramesInFlight, default_streams, prepared_frames
from edgecnn.vision.preprocess import parse_floats
from edgecnn.vision.sources import (
    STDIN,
    Frame,
    FrameError,
    Item,
    VideoPicture,
    expand,
    is_video,
    open_sources,
    video_frame_count,
)

NAME = "detect"
EXIT_INTERRUPTED = 130
BACKLOG = 8
"""Inferred frames queued for output at most: bounds memory when encoding is the slower side."""


def frame_record(frame: Frame, detections: list[Detection]) -> dict[str, Any]:
    """The JSON object of one image or frame."""
    return {
        "source": frame.source,
        "index": frame.index,
        "timestamp": frame.timestamp,
        "width": frame.size[0],
        "height": frame.size[1],
        "detections": [
            {
                "label": d.label,
                "class_id": d.class_id,
                "score": round(d.score, 6),
                "box": [round(v, 2) for v in d.box],
            }
            for d in detections
        ],
    }


def print_table(frame: Frame, detections: list[Detection]) -> None:
    where = f" frame {frame.index} ({frame.timestamp:.3f} s)" if frame.timestamp is not None else ""
    console.print(headline(frame.source, f"{where}: {len(detections)} detection(s)"))
    if not detections:
        return
    table = Table(box=None, header_style="bold", padding=(0, 2))
    table.add_column("class", justify="left")
    for column in ("score", "x1", "y1", "x2", "y2"):
        table.add_column(column, justify="right")
    for d in detections:
        table.add_row(d.label, f"{d.score:.3f}", *(f"{v:.1f}" for v in d.box))
    console.print(table)


class AnnotatedWriter:
    """Annotated outputs under ``directory``: one image per image source, one MP4 per video or camera."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._videos: dict[str, Any] = {}

    def write(self, frame: Frame, detections: list[Detection]) -> None:
        if frame.timestamp is None and not frame.source.startswith("camera:"):
            draw_detections(frame.image, detections).save(self.directory / Path(frame.source).name)
            return
        from edgecnn.vision.video import VideoWriter, annotate

        if frame.source not in self._videos:
            stem = (
                Path(frame.source).stem
                if not frame.source.startswith("camera:")
                else frame.source.replace(":", "_")
            )
            self._videos[frame.source] = VideoWriter(self.directory / f"{stem}.mp4")
        picture = frame.picture
        # a decoded frame is drawn on in YUV, as the encoder takes it: no full-size RGB round trip
        annotated = (
            annotate(picture, detections)
            if isinstance(picture, VideoPicture)
            else draw_detections(picture, detections)
        )
        self._videos[frame.source].write(annotated, frame.timestamp)

    def close(self) -> None:
        """Finish every video file."""
        for writer in self._videos.values():
            writer.close()


class FrameOutputs:
    """Everything after inference, in a thread of its own and in arrival order: decoding and NMS
    (:meth:`Detector.finish`), the table or JSON line, and the annotated image or video frame.
    The caller's thread is left to run the network, so this work overlaps the next frame's."""

    def __init__(self, detector: Detector, as_json: bool, save: Path | None) -> None:
        self.detector = detector
        self.as_json = as_json
        self.writer = AnnotatedWriter(save) if save is not None else None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="edgecnn-outputs")
        self._pending: deque[Future[None]] = deque()

    def submit(self, frame: Frame, inferred: Inferred) -> None:
        """Queue one frame's outputs."""
        self._queue(self._output, frame, inferred)

    def skip(self, item: FrameError) -> None:
        """Queue the report of an unreadable image or frame, in its place among the outputs."""
        self._queue(report_skipped, item, self.as_json)

    def _queue(self, work: Callable[..., None], *args: object) -> None:
        """Run ``work`` after everything queued before; waits when more than BACKLOG frames behind."""
        while self._pending and (self._pending[0].done() or len(self._pending) >= BACKLOG):
            self._pending.popleft().result()  # raises the worker's error, if any
        self._pending.append(self._pool.submit(work, *args))

    def _output(self, frame: Frame, inferred: Inferred) -> None:
        detections = self.detector.finish(inferred)
        if self.as_json:
            print(json.dumps(frame_record(frame, detections)), flush=True)
        else:
            print_table(frame, detections)
        if self.writer is not None:
            self.writer.write(frame, detections)

    def close(self) -> None:
        """Wait for the queued frames, then finish every video file."""
        self._pool.shutdown(wait=True)
        try:
            while self._pending:
                self._pending.popleft().result()
        finally:
            if self.writer is not None:
                self.writer.close()


class Interruption:
    """SIGINT handling for the frame loop: a first Ctrl-C during :meth:`deferred` work is noted in
    ``requested`` and the work finishes; between frames, or at a second Ctrl-C, it raises
    KeyboardInterrupt as usual. Installed from the main thread only (where Python runs handlers)."""

    def __init__(self) -> None:
        self.requested = False
        self._busy = False
        self._previous: Any = None

    def __enter__(self) -> Interruption:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Work that a first Ctrl-C must not cut in half (a frame's outputs, closing the files)."""
        self._busy = True
        try:
            yield
        finally:
            self._busy = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._busy and not self.requested:
            self.requested = True
            return
        raise KeyboardInterrupt


def place(item: FrameError) -> str:
    """Where an unreadable image or frame is: the file, and the frame index within a video."""
    return f"{item.source} (frame {item.index})" if item.index else item.source


def report_skipped(item: FrameError, as_json: bool) -> None:
    """An unreadable image or frame, skipped: a line on stderr (and a JSON line with --json)."""
    error_console.print(f"skipped {place(item)}: {item.message}")
    if as_json:
        print(json.dumps({"source": item.source, "index": item.index, "error": item.message}))


def total_frames(sources: list[str], camera: str | None) -> int | None:
    """Frames to expect, for the progress bar; None when a source's length is unknown."""
    if camera is not None or STDIN in sources:
        return None
    total = 0
    for path in expand(sources):
        count = video_frame_count(path) if is_video(path) else 1
        if count is None:
            return None
        total += count
    return total


def build_detector(
    arguments: list[str],
    faces: bool,
    options: dict[str, Any],
    face_options: dict[str, Any],
) -> tuple[Detector, list[str]]:
    """The detector and the sources: with --faces every argument is a source, else the first is the model."""
    if faces:
        return Detector.faces(**face_options), arguments
    if not arguments:
        raise InputError("give a MODEL and at least one SOURCE (or --faces and SOURCEs)")
    return Detector.load(arguments[0], **options), arguments[1:]


def command(
    arguments: list[str] = typer.Argument(
        None,
        metavar="MODEL SOURCE...",
        help="Model (.cfg, .onnx, .ecnn) then images, folders, videos or '-'.",
    ),
    faces: bool = typer.Option(False, "--faces", help="Use the bundled face detector (no MODEL argument)."),
    weights: str | None = typer.Option(None, help="Darknet .weights file for a .cfg model."),
    head: str | None = typer.Option(
        None, help="Head kind: darknet, yolov8, yolov5, yolov3[:anchors], yolov2[:anchors]."
    ),
    labels: str | None = typer.Option(None, help="Text file with one class name per line."),
    score: float | None = typer.Option(None, min=0.0, max=1.0, help="Score threshold [0.25; faces 0.9]."),
    iou: float | None = typer.Option(None, min=0.0, max=1.0, help="NMS IoU threshold [0.45; faces 0.3]."),
    resize: str | None = typer.Option(None, help="letterbox or stretch (default: as the model was trained)."),
    scales: str | None = typer.Option(
        None, help="Faces: window sides as fractions of the shorter image side."
    ),
    stride: float = typer.Option(
        0.25, min=0.01, max=1.0, help="Faces: window step as a fraction of the window."
    ),
    camera: str | None = typer.Option(None, help="Camera index (0) or V4L2 device path (/dev/video0)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per image/frame (JSON Lines)."),
    save: Path | None = typer.Option(None, help="Write annotated images and videos to this directory."),
    strict: bool = typer.Option(False, "--strict", help="Stop at the first unreadable image or frame."),
    threads: int | None = typer.Option(None, min=1, help="Threads (default: all cores)."),
    streams: int | None = typer.Option(
        None,
        min=1,
        help="Frames inferred side by side, each on one thread (throughput; latency grows with it). "
        "1: one frame at a time on all threads. [default: one per thread, at most one per core; "
        "1 with --camera]",
    ),
) -> None:
    """Detect objects with a YOLO MODEL (or faces with --faces) in each SOURCE and print the boxes."""
    options: dict[str, Any] = {"weights": weights, "head": head, "labels": labels, "threads": threads}
    options["resize"] = resize
    face_options: dict[str, Any] = {"threads": threads, "stride": stride}
    face_options["scales"] = parse_floats(scales, "--scales") if scales else DEFAULT_SCALES
    for key, value in (("score_threshold", score), ("iou_threshold", iou)):
        if value is not None:
            options[key] = face_options[key] = value
    detector, sources = build_detector(list(arguments or []), faces, options, face_options)
    if not sources and camera is None:
        raise InputError("no SOURCE given: images, folders, videos, '-' for paths on stdin, or --camera")
    if not as_json:
        console.print(headline(detector.description), soft_wrap=True)
    outputs = FrameOutputs(detector, as_json, save)
    in_flight = FramesInFlight[Item](detector, streams or default_streams(detector, live=camera is not None))
    done = skipped = 0
    started = time.perf_counter()
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]:.1f} frames/s"),
        TimeRemainingColumn(),
        console=error_console,
        transient=True,
        disable=(total := total_frames(sources, camera)) is not None and total < 2,
    )
    interrupted = False
    task = progress.add_task("detecting", total=total, rate=0.0)

    def take(results: list[tuple[Item, Inferred | None]]) -> None:
        """Hand inferred frames (and skipped ones, in their place) to the outputs, in order."""
        nonlocal done, skipped
        for item, inferred in results:
            if isinstance(item, FrameError):
                outputs.skip(item)
                skipped += 1
            else:
                assert inferred is not None  # only a FrameError has nothing to infer
                outputs.submit(item, inferred)
                done += 1
                rate = done / (time.perf_counter() - started)
                progress.update(task, advance=1, rate=rate, description=Path(item.source).name)

    with Interruption() as interruption:
        try:
            with progress:
                for item, prepared in prepared_frames(detector, open_sources(sources, camera=camera)):
                    with interruption.deferred():
                        if isinstance(item, FrameError) and strict:
                            take(in_flight.drain())  # the frames before it are output, as they come
                            raise InputError(f"{place(item)}: {item.message}")
                        take(in_flight.put(item, prepared))
                    if interruption.requested:
                        break
                with interruption.deferred():
                    take(in_flight.drain())
        except KeyboardInterrupt:
            interrupted = True
        finally:
            with interruption.deferred():
                in_flight.close()
                outputs.close()
    if interrupted or interruption.requested:
        error_console.print(f"interrupted after {done} frame(s); outputs written so far are complete")
        raise typer.Exit(EXIT_INTERRUPTED)
    elapsed = time.perf_counter() - started
    summary = f"{done} frame(s) in {elapsed:.2f} s ({done / elapsed if elapsed else 0:.1f} frames/s)"
    error_console.print(summary + (f", {skipped} skipped" if skipped else ""))
