"""The load trace: a LoadSampler read every 50 ms (seed 001's sampling) on a thread of its own,
the recent samples kept for the page, and, with a CSV path, every sample and frame/inference event
written in time order (the input of a DVFS governor).

CSV columns: ``time_s`` (since the start), ``kind`` (``sample``, ``frame``, ``inference_start``,
``inference_end``, ``frame_error``), ``cpuN_pct`` per core, ``cpuN_mhz`` per core where cpufreq
exposes it, ``power_w`` where a measured meter exists, ``gpuN_pct`` and ``gpuN_power_w`` per NVIDIA
GPU, then ``frame`` (the frame's index in its source) and ``latency_ms`` (inference time, on
``inference_end``). Sample rows leave the event columns empty and event rows the load columns."""

from __future__ import annotations

import contextlib
import csv
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO

from edgecnn.monitor.load import LoadSample, LoadSampler

PERIOD_S = 0.05
EVENT_KINDS = ("frame", "inference_start", "inference_end", "frame_error")


@dataclass(frozen=True)
class TraceEvent:
    seconds: float
    kind: str
    frame: int
    latency_ms: float | None = None


class TraceRecorder:
    """``start()``, ``event(...)`` from any thread, ``samples_since(n)`` for the page, ``stop()``."""

    def __init__(
        self,
        sampler: LoadSampler,
        *,
        period: float = PERIOD_S,
        csv_path: str | os.PathLike[str] | None = None,
        keep: int = 1200,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if period <= 0:
            raise ValueError(f"sampling period must be positive, got {period}")
        self.sampler = sampler
        self.period = period
        self.csv_path = csv_path
        self.clock = clock
        self.recent: deque[tuple[int, LoadSample]] = deque(maxlen=keep)
        self.count = 0  # samples taken
        self.missed = 0  # ticks skipped because a sample came late
        self._events: queue.SimpleQueue[TraceEvent] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = 0.0

    def columns(self) -> list[str]:
        sampler = self.sampler
        names = ["time_s", "kind"]
        names += [f"cpu{i}_pct" for i in range(sampler.cores)]
        if sampler.freq_files is not None:
            names += [f"cpu{i}_mhz" for i in range(sampler.cores)]
        if sampler.meter is not None:
            names.append("power_w")
        for i in range(len(sampler.gpus)):
            names += [f"gpu{i}_pct", f"gpu{i}_power_w"]
        return [*names, "frame", "latency_ms"]

    def start(self) -> None:
        self._start = self.clock()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="edgecnn-monitor-trace", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops sampling; the CSV is complete (every event recorded so far written) on return."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def now(self) -> float:
        """Seconds since ``start``, on the clock the samples use."""
        return self.clock() - self._start

    def event(self, kind: str, frame: int, latency_ms: float | None = None) -> None:
        """Records an event now for the CSV (nothing without one); never blocks: the sampling thread
        drains the queue."""
        if kind not in EVENT_KINDS:
            raise ValueError(f"unknown trace event {kind!r} (known: {', '.join(EVENT_KINDS)})")
        if self.csv_path is None:
            return
        self._events.put(TraceEvent(self.now(), kind, frame, latency_ms))

    def samples_since(self, seq: int) -> list[tuple[int, LoadSample]]:
        """The kept samples numbered above ``seq`` (numbers start at 1), oldest first."""
        with self._lock:
            return [(n, s) for n, s in self.recent if n > seq]

    def _run(self) -> None:
        with _open_csv(self.csv_path) as out:
            writerow = csv.writer(out).writerow if out is not None else None
            if writerow is not None:
                writerow(self.columns())
            tick = 1
            while True:
                deadline = self._start + tick * self.period
                stopping = self._stop.wait(max(0.0, deadline - self.clock()))
                sample = self.sampler.sample(self.now())
                with self._lock:
                    self.count += 1
                    self.recent.append((self.count, sample))
                if writerow is not None:
                    self._write(writerow, sample)
                if stopping:
                    return
                late = int((self.clock() - self._start) / self.period) - tick
                self.missed += max(0, late)
                tick += 1 + max(0, late)

    def _write(self, writerow: Callable[[list[object]], object], sample: LoadSample) -> None:
        events = []
        while True:
            try:
                events.append(self._events.get_nowait())
            except queue.Empty:
                break
        blank_load = [""] * (len(self.columns()) - 4)
        for event in sorted(events, key=lambda e: e.seconds):
            latency = "" if event.latency_ms is None else f"{event.latency_ms:.3f}"
            writerow([f"{event.seconds:.4f}", event.kind, *blank_load, event.frame, latency])
        writerow([f"{sample.seconds:.4f}", "sample", *self._load_cells(sample), "", ""])

    def _load_cells(self, sample: LoadSample) -> list[str]:
        cells = [f"{p:.1f}" for p in sample.cpu_percent]
        if sample.cpu_mhz is not None:
            cells += [f"{f:.0f}" for f in sample.cpu_mhz]
        if self.sampler.meter is not None:
            cells.append("" if sample.watts is None else f"{sample.watts:.3f}")
        for percent, watts in zip(sample.gpu_percent, sample.gpu_watts):
            cells += [f"{percent:.0f}", f"{watts:.2f}"]
        return cells


@contextlib.contextmanager
def _open_csv(path: str | os.PathLike[str] | None) -> Iterator[IO[str] | None]:
    if path is None:
        yield None
        return
    with open(path, "w", newline="") as out:
        yield out
