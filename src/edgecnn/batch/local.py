"""The local engine: worker processes on this machine's cores, one coordinator committing their rows.

Processes, not threads: each worker's Python (the executor's step loop, pre-processing, row
building) then runs on its own core without sharing a GIL, and a worker that crashes takes only its
own items with it. Workers are started with ``spawn`` (numba's thread pool does not survive a
fork) and each talks to the coordinator over a pipe of its own, so that one killed mid-message
cannot block the others. The coordinator keeps up to two chunks of items outstanding per worker,
commits the rows it receives in shards (edgecnn.batch.shards), and when a worker dies starts
another on the same cores and hands its unfinished items out again one at a time (so that an item
that crashes its worker fails alone), each at most ``max_retries`` times before its row records the
crash.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from edgecnn.batch.items import Item
from edgecnn.batch.job import BatchJob
from edgecnn.batch.shards import ShardWriter
from edgecnn.batch.tasks import failed_row
from edgecnn.batch.worker import worker_main
from edgecnn.errors import EdgeCNNError

Progress = Callable[[int], None]
"""Called with the number of rows just committed or buffered (for a progress bar)."""

STOP_WAIT_S = 5.0
POLL_S = 0.5
MAX_RESTARTS_PER_WORKER = 8
"""A worker slot restarted more often than this fails the job: the model, not an item, is at fault."""


@dataclass
class WorkerSlot:
    """One worker process, the cores it is bound to, and the items it has not answered yet."""

    number: int
    cores: list[int] | None
    process: BaseProcess
    conn: Connection
    ready: bool = False
    outstanding: dict[int, Item] = field(default_factory=dict)
    restarts: int = 0


class LocalEngine:
    """Runs ``items`` of ``job`` on ``groups`` (one core group per worker) and commits the rows."""

    def __init__(
        self,
        job: BatchJob,
        groups: Sequence[list[int] | None],
        threads: int,
        writer: ShardWriter,
        on_rows: Progress | None = None,
    ) -> None:
        self.job = job
        self.threads = threads
        self.writer = writer
        self.on_rows = on_rows
        self.context = multiprocessing.get_context("spawn")
        self.chunk = max(1, job.batch_size) * 2
        self.slots = [self._start(n, list(g) if g else None, 0) for n, g in enumerate(groups)]
        self.buffer: list[dict[str, Any]] = []
        self.last_commit = time.monotonic()
        self.attempts: collections.Counter[int] = collections.Counter()
        self.retry: collections.deque[Item] = collections.deque()
        self.crashes = 0

    def _start(self, number: int, cores: list[int] | None, restarts: int) -> WorkerSlot:
        ours, theirs = self.context.Pipe(duplex=True)
        process = self.context.Process(
            target=worker_main,
            args=(self.job, cores, self.threads, theirs),
            name=f"edgecnn-batch-{number}",
            daemon=True,
        )
        process.start()
        theirs.close()
        return WorkerSlot(number, cores, process, ours, restarts=restarts)

    def run(self, items: Sequence[Item]) -> None:
        """Process every item; rows are committed as they come, the last ones before returning."""
        pending = collections.deque(items)
        try:
            while pending or self.retry or any(s.outstanding for s in self.slots):
                self._dispatch(pending)
                self._serve()
                if len(self.buffer) >= self.job.shard_rows or (
                    self.buffer and time.monotonic() - self.last_commit >= self.job.commit_seconds
                ):
                    self._commit()
        except BaseException:
            with contextlib.suppress(Exception):  # the rows already received are complete: keep them
                self._commit()
            raise
        else:
            self._commit()
        finally:
            self._stop()

    def _dispatch(self, pending: collections.deque[Item]) -> None:
        for slot in self.slots:
            if not slot.ready:
                continue
            while len(slot.outstanding) < 2 * self.chunk and (pending or self.retry):
                if self.retry:  # a crashed worker's item goes alone, so that a bad item fails alone
                    chunk = [self.retry.popleft()]
                else:
                    chunk = [pending.popleft() for _ in range(min(self.chunk, len(pending)))]
                slot.outstanding.update((i.index, i) for i in chunk)
                try:
                    slot.conn.send(("items", chunk))
                except OSError:
                    break  # it died: _serve sees its sentinel and hands the items out again

    def _serve(self) -> None:
        """Wait for messages or deaths, and handle them."""
        waitables: dict[Any, WorkerSlot] = {}
        for slot in self.slots:
            waitables[slot.conn] = slot
            waitables[slot.process.sentinel] = slot
        for ready in wait(list(waitables), timeout=POLL_S):
            slot = waitables[ready]
            if ready is slot.conn:
                try:
                    self._receive(slot, slot.conn.recv())
                except (EOFError, OSError, pickle.UnpicklingError):
                    self._replace(slot)
            elif slot in self.slots and not slot.process.is_alive():
                self._replace(slot)

    def _receive(self, slot: WorkerSlot, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "ready":
            slot.ready = True
        elif kind == "rows":
            rows = [row for row in message[1] if slot.outstanding.pop(int(row["index"]), None)]
            self.buffer.extend(rows)
            if self.on_rows is not None:
                self.on_rows(len(rows))
        elif kind == "fatal":
            raise EdgeCNNError(f"batch worker {slot.number} cannot start: {message[1]}")

    def _replace(self, slot: WorkerSlot) -> None:
        """A dead worker: take the rows it sent before dying, requeue the rest, start another."""
        if slot not in self.slots:
            return
        with contextlib.suppress(EOFError, OSError, pickle.UnpicklingError):
            while slot.conn.poll():
                self._receive(slot, slot.conn.recv())
        slot.process.join(timeout=STOP_WAIT_S)
        slot.conn.close()
        self.crashes += 1
        for item in slot.outstanding.values():
            self.attempts[item.index] += 1
            if self.attempts[item.index] > self.job.max_retries:
                self.buffer.append(
                    failed_row(
                        item,
                        f"its worker crashed each of the {self.attempts[item.index]} times it ran "
                        f"(exit code {slot.process.exitcode})",
                    )
                )
                if self.on_rows is not None:
                    self.on_rows(1)
            else:
                self.retry.append(item)
        if slot.restarts >= MAX_RESTARTS_PER_WORKER:
            raise EdgeCNNError(
                f"batch worker {slot.number} died {slot.restarts + 1} times "
                f"(last exit code {slot.process.exitcode}); giving up"
            )
        self.slots[self.slots.index(slot)] = self._start(slot.number, slot.cores, slot.restarts + 1)

    def _commit(self) -> None:
        self.writer.commit(self.buffer)
        self.buffer = []
        self.last_commit = time.monotonic()

    def _stop(self) -> None:
        for slot in self.slots:
            with contextlib.suppress(OSError):
                slot.conn.send(("stop",))
        deadline = time.monotonic() + STOP_WAIT_S
        for slot in self.slots:
            slot.process.join(timeout=max(0.0, deadline - time.monotonic()))
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join()
            slot.conn.close()
