"""One worker process of the local engine: its own model, bound to its own cores, decoding the next
items while the current batch runs.

Three threads share the process: the receiver takes the items the coordinator sends (and notices
the coordinator's death as the end of its pipe), the decoder pre-processes them into a bounded
queue, and the main thread takes up to ``batch_size`` ready items at once (dynamic batching: it
never waits for a batch to fill while nothing more is coming), runs them and sends the rows back.
Pillow and numba's kernels release the GIL, so decoding overlaps inference. Messages to the
coordinator: ``("ready", pid)``, ``("rows", [row, ...])``, ``("fatal", message)``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import traceback
from multiprocessing.connection import Connection
from typing import Any

from edgecnn.batch.items import Item
from edgecnn.batch.job import BatchJob
from edgecnn.batch.tasks import Prepared, Runner, failed_row
from edgecnn.errors import EdgeCNNError

_END = None  # queue sentinel: no more items will come
FILL_WAIT_S = 0.05
"""How long the inference thread waits for a batch to fill while the decoder still has items."""


def worker_main(job: BatchJob, cores: list[int] | None, threads: int, conn: Connection) -> None:
    """Entry point of a spawned worker: bind, load, then serve items until told to stop or orphaned."""
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)
    try:
        from edgecnn.api import load

        runner = Runner(load(job.model, job.weights, threads=threads), job.task, job.batch_size)
    except EdgeCNNError as exc:
        with contextlib.suppress(OSError):
            conn.send(("fatal", str(exc)))
        return
    try:
        conn.send(("ready", os.getpid()))
    except OSError:
        return  # the coordinator died while this worker was starting
    todo: queue.Queue[Item | None] = queue.Queue()
    ready: queue.Queue[Prepared | None] = queue.Queue(maxsize=2 * job.batch_size)
    threading.Thread(target=_receive, args=(conn, todo), daemon=True).start()
    threading.Thread(target=_decode, args=(runner, todo, ready), daemon=True).start()
    with contextlib.suppress(EOFError, OSError):  # the coordinator is gone: nothing to report to
        _infer(runner, job.batch_size, todo, ready, conn)


def _receive(conn: Connection, todo: queue.Queue[Item | None]) -> None:
    """Coordinator messages -> items to do; a closed pipe (coordinator killed) ends the worker."""
    try:
        while True:
            message = conn.recv()
            if message[0] == "items":
                for item in message[1]:
                    todo.put(item)
            else:  # "stop"
                break
    except (EOFError, OSError):
        os._exit(0)  # orphaned: the coordinator died, its uncommitted items will be redone
    todo.put(_END)


def _decode(runner: Runner, todo: queue.Queue[Item | None], ready: queue.Queue[Prepared | None]) -> None:
    """Items -> prepared items; an item counts as done in ``todo`` once it is in ``ready``."""
    while (item := todo.get()) is not _END:
        try:
            ready.put(runner.prepare(item))
        except Exception as exc:  # one item's unexpected failure must not take the worker down
            ready.put(Prepared(item, error=f"{type(exc).__name__}: {exc}"))
        todo.task_done()
    ready.put(_END)


def _infer(
    runner: Runner,
    batch_size: int,
    todo: queue.Queue[Item | None],
    ready: queue.Queue[Prepared | None],
    conn: Connection,
) -> None:
    finished = False
    while not finished:
        first = ready.get()
        if first is _END:
            return
        batch = [first]
        while len(batch) < batch_size:
            try:
                more = ready.get(timeout=FILL_WAIT_S) if _decoding(todo) else ready.get_nowait()
            except queue.Empty:
                break
            if more is _END:
                finished = True
                break
            batch.append(more)
        conn.send(("rows", _rows(runner, batch)))


def _decoding(todo: queue.Queue[Item | None]) -> bool:
    """Whether items are waiting or being decoded (the one the decoder holds counts until it is
    ready): a batch waits for those, and only those."""
    return todo.unfinished_tasks > 0


def _rows(runner: Runner, batch: list[Prepared]) -> list[dict[str, Any]]:
    try:
        return runner.infer(batch)
    except Exception as exc:  # a kernel bug on one batch: its items are reported, the job goes on
        message = f"inference failed: {type(exc).__name__}: {exc}"
        traceback.print_exc()
        return [failed_row(p.item, message) for p in batch]
