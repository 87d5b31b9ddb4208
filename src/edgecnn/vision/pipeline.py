"""Decoding and pre-processing in a reader thread, ahead of inference, through a bounded queue.

The reader decodes the next frames (PyAV and Pillow release the GIL while they work) and runs
the detector's ``prepare_frame`` on them while the caller's thread runs the model on the current one;
the queue's bound keeps memory flat when inference is the slower side."""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterable
from typing import cast

from edgecnn.vision.detector import Detector, Prepared
from edgecnn.vision.sources import Frame, Item

DEPTH = 4
_DONE = object()


def prepared_frames(
    detector: Detector, items: Iterable[Item], depth: int = DEPTH
) -> Generator[tuple[Item, Prepared | None], None, None]:
    """``items`` paired with their prepared input (None for a :class:`FrameError`), prepared in a
    thread of their own. Closing the iterator (or leaving a ``for`` early) stops the reader after the
    frame it is on; an exception in the reader is raised here."""
    ready: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: object) -> bool:
        while not stop.is_set():
            try:
                ready.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for item in items:
                prepared = detector.prepare_frame(item) if isinstance(item, Frame) else None
                if not put((item, prepared)):
                    return
            put(_DONE)
        except BaseException as exc:  # handed to the consumer, which raises it
            put(exc)

    reader = threading.Thread(target=read, name="edgecnn-frame-reader", daemon=True)
    reader.start()
    try:
        while True:
            entry = ready.get()
            if entry is _DONE:
                return
            if isinstance(entry, BaseException):
                raise entry
            yield cast(tuple[Item, Prepared | None], entry)
    finally:
        stop.set()
        reader.join(timeout=5)  # a reader blocked on stdin or a camera is left to exit with the process
