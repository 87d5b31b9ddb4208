"""Decoding and pre-processing in a reader thread, ahead of inference, through a bounded queue.

The reader decodes the next frames (PyAV and Pillow release the GIL while they work) and runs
the detector's ``prepare`` on them while the caller's thread runs the model on the current one;
the queue's bound keeps memory flat when inference is the slower side.

Where inference already uses every core of an otherwise idle machine, each helper thread (this
reader, `edgecnn detect`'s output thread) lowers its own priority by :data:`HELPER_NICE`: it then
runs mostly where a core is idle (inference's serial layers and barriers) instead of pre-empting
one of the kernels' workers, which would stall that whole parallel layer (decided once, as each
helper starts). While the helpers run, :func:`inference_first` also shortens Python's switch
interval, so that inference's thread gets the GIL back promptly between layers from a helper
running Python code."""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import cast

from edgecnn.vision.detector import Detector, Prepared
from edgecnn.vision.sources import Frame, Item

DEPTH = 4
HELPER_NICE = 10
"""How much lower a helper thread's priority is than inference's (a nice increment). Not +19 or
Linux's SCHED_IDLE: a busy process started later would starve such helpers, and inference with
them; at +10 a helper still gets about a tenth of a contended core's time."""
QUIET_LOAD = 0.5
"""The 1-minute load average per core below which the machine counts as otherwise idle. On a busy
one the helpers keep their priority: Linux weighs a process's share of a core by the priorities of
its threads runnable there, so a lowered helper would lose its share to the other processes and
leave inference waiting for frames."""
SWITCH_INTERVAL = 0.0005
"""Seconds a thread waiting for the GIL lets its holder keep it (Python's default is 0.005): the
network's thread takes the GIL between layers, and a helper in Python code would otherwise hold
both cores' next layer back by up to the default each time."""
_DONE = object()


@contextmanager
def inference_first() -> Iterator[None]:
    """The switch interval at most SWITCH_INTERVAL for the duration (it is process-wide: restored after)."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(min(previous, SWITCH_INTERVAL))
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def machine_is_quiet(cores: int) -> bool:
    """Whether the 1-minute load average is below QUIET_LOAD per core (True where it is unknown)."""
    try:
        return os.getloadavg()[0] < QUIET_LOAD * cores
    except (AttributeError, OSError):
        return True


def yield_to_inference(threads: int) -> None:
    """Lower the calling helper thread's priority by HELPER_NICE when inference runs ``threads``
    threads on every core this process may use and the machine is otherwise quiet; with a core to
    spare, or other processes busy, it keeps its priority. Only the calling thread changes (Linux
    nice values are per thread); elsewhere, nothing."""
    from edgecnn.devices import available_cores

    cores = available_cores()
    if threads < cores or not hasattr(os, "setpriority") or not machine_is_quiet(cores):
        return
    tid = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + HELPER_NICE))
    except OSError:  # not allowed here: the helper keeps its priority
        pass


def prepared_frames(
    detector: Detector, items: Iterable[Item], depth: int = DEPTH
) -> Iterator[tuple[Item, Prepared | None]]:
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
        yield_to_inference(detector.threads)
        try:
            for item in items:
                prepared = detector.prepare(item.image) if isinstance(item, Frame) else None
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
