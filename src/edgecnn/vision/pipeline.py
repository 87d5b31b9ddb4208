"""Decoding and pre-processing in a reader thread, ahead of inference, through a bounded queue;
several frames inferred side by side, each on one thread.

The reader decodes the next frames (PyAV and Pillow release the GIL while they work) and runs
the detector's ``prepare_frame`` on them while inference runs on the current ones; the queue's
bound keeps memory flat when inference is the slower side.

:class:`FramesInFlight` runs the network on up to ``streams`` frames at once, each on one thread
of its own, and hands the results back in the frames' order. One frame on all the threads splits
every layer between them, and each layer ends at a barrier where every thread waits for the
slowest: a helper thread (the reader, the output thread) that pre-empts one of them stalls the
others too. A frame on one thread has no barrier, so a helper costs only its own CPU time; what a
frame waits for is the frames before it, so its latency grows with the frames in flight. Hence
side by side for files, folders and videos (throughput), one frame at a time on all threads for a
camera (latency): :func:`default_streams`."""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar, cast

from edgecnn.devices import available_cores
from edgecnn.errors import InputError
from edgecnn.vision.detector import Detector, Inferred, Prepared
from edgecnn.vision.sources import Frame, Item

DEPTH = 4
_DONE = object()
T = TypeVar("T")


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


def default_streams(detector: Detector, live: bool) -> int:
    """Frames in flight by default: 1 for a live source such as a camera (each frame as soon as
    possible, on every thread), else one per thread of the detector's budget, at most one per core
    this process may use."""
    return 1 if live else max(1, min(detector.threads, available_cores()))


def side_by_side_is_safe() -> bool:
    """Whether the network may run in several threads at once: numba's threading layer must allow
    it (``omp``, ``tbb``; not ``workqueue``), and is known only once its pool has started."""
    from edgecnn.runtime.batch import threading_layer_is_safe

    return threading_layer_is_safe()


class FramesInFlight(Generic[T]):
    """Up to ``streams`` frames inferred side by side, each on one thread; their results come back
    in the order the frames were put in, each with the caller's tag (e.g. the frame).

    Frames run one at a time on all the detector's threads, in the caller's thread, when
    ``streams`` is 1 or while :func:`side_by_side_is_safe` says no (always the first frame, which
    starts numba's pool: plans are built and compiled code is loaded by one run alone)."""

    def __init__(self, detector: Detector, streams: int) -> None:
        if streams < 1:
            raise InputError(f"streams must be at least 1, got {streams}")
        self.detector = detector
        self.streams = streams
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque[tuple[T, Future[Inferred | None]]] = deque()
        self._safe = False  # side_by_side_is_safe() once true stays true: numba's layer is fixed

    def _side_by_side(self) -> bool:
        self._safe = self._safe or (self.streams > 1 and side_by_side_is_safe())
        return self._safe

    def put(self, tag: T, prepared: Prepared | None) -> list[tuple[T, Inferred | None]]:
        """Start inferring ``prepared`` (None: nothing to infer, e.g. an unreadable frame, which
        keeps its place in the order). Returns the results that are ready, oldest first: with
        ``streams`` frames in flight it first waits for the oldest."""
        if prepared is not None and not self._side_by_side():
            ready = self.drain()
            ready.append((tag, self.detector.infer([prepared])[0]))
            return ready
        future: Future[Inferred | None] = Future()
        if prepared is None:
            future.set_result(None)
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.streams, thread_name_prefix="edgecnn-stream")
            future = self._pool.submit(self._infer_alone, prepared)
        self._pending.append((tag, future))
        ready = []
        while self._pending and (len(self._pending) > self.streams - 1 or self._pending[0][1].done()):
            tag, oldest = self._pending.popleft()
            ready.append((tag, oldest.result()))  # waits; raises the stream's error, if any
        return ready

    def _infer_alone(self, prepared: Prepared) -> Inferred:
        return self.detector.infer([prepared], threads=1)[0]

    def drain(self) -> list[tuple[T, Inferred | None]]:
        """Every frame still in flight, waited for, oldest first."""
        ready = []
        while self._pending:
            tag, future = self._pending.popleft()
            ready.append((tag, future.result()))
        return ready

    def close(self) -> None:
        """Drop the frames not taken (those running finish first: their threads cannot be stopped)."""
        self._pending.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
