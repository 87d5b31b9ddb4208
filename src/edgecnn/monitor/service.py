"""Monitor: the inference loop, the 50 ms trace and the web server together, started and stopped
as one (``start``/``stop`` for tests and the API, ``serve_until_signal`` for the command)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import TYPE_CHECKING

from edgecnn.monitor.errors import MonitorError, require
from edgecnn.monitor.load import LoadSampler
from edgecnn.monitor.pipeline import DrawDetections, FrameDetector, FrameSource, InferenceLoop, LatestFrame
from edgecnn.monitor.trace import PERIOD_S, TraceRecorder

if TYPE_CHECKING:
    from aiohttp import web

    from edgecnn.monitor.server import FrameSignal

LOOPBACK = "127.0.0.1"
STOP_TIMEOUT_S = 10.0  # the frame in hand finishes first; a camera read may hang past it
SHUTDOWN_TIMEOUT_S = 1.0  # open streams are cut after this


class Monitor:
    """Serves the live page on ``host:port`` (port 0: an ephemeral one; ``url`` says which)."""

    def __init__(
        self,
        detector: FrameDetector,
        frames: FrameSource,
        *,
        host: str = LOOPBACK,
        port: int = 0,
        trace: str | os.PathLike[str] | None = None,
        period: float = PERIOD_S,
        sampler: LoadSampler | None = None,
        draw: DrawDetections | None = None,
        info: dict[str, object] | None = None,
    ) -> None:
        self.detector = detector
        self.frames = frames
        self.host = host
        self.port = port
        self.trace = trace
        self.period = period
        self.sampler = sampler
        self.draw = draw
        self.info = dict(info or {})
        self.board = LatestFrame()
        self.addresses: list[tuple[str, int]] = []
        self._recorder: TraceRecorder | None = None
        self._loop: InferenceLoop | None = None
        self._events: asyncio.AbstractEventLoop | None = None
        self._server_thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._signal: FrameSignal | None = None

    @property
    def url(self) -> str:
        host, port = self.addresses[0]
        return f"http://{host}:{port}/"

    @property
    def recorder(self) -> TraceRecorder:
        if self._recorder is None:
            raise MonitorError("the monitor is not started")
        return self._recorder

    @property
    def inference(self) -> InferenceLoop:
        if self._loop is None:
            raise MonitorError("the monitor is not started")
        return self._loop

    def status(self) -> str:
        """``running``, ``ended`` (the source has no more frames) or ``failed: <why>``."""
        loop = self.inference
        if loop.failure is not None:
            return f"failed: {loop.failure}"
        return "ended" if loop.ended.is_set() else "running"

    def start(self) -> Monitor:
        """Binds the server, then starts sampling and the loop; returns at once."""
        require("aiohttp")
        from edgecnn.monitor.server import FrameSignal, build_app

        draw = self.draw
        if draw is None:
            from edgecnn.vision.draw import draw_detections

            draw = draw_detections
        sampler = self.sampler or LoadSampler.for_this_machine()
        self._recorder = TraceRecorder(sampler, period=self.period, csv_path=self.trace)
        self._loop = InferenceLoop(self.detector, self.frames, self.board, self._recorder, draw)
        self.info.setdefault("cores", sampler.cores)
        self.info["sensors"] = {
            "cpufreq": sampler.freq_files is not None,
            "power": None if sampler.meter is None else sampler.meter.describes,
            "gpus": len(sampler.gpus),
        }
        self.info["trace"] = None if self.trace is None else os.fspath(self.trace)

        sock = _bind(self.host, self.port)
        self.addresses = [_address(sock)]
        events = asyncio.new_event_loop()
        self._events = events
        self._signal = FrameSignal(events)
        app = build_app(self.board, self._recorder, self._signal, self.info, self.status)
        self._server_thread = threading.Thread(
            target=events.run_forever, name="edgecnn-monitor-http", daemon=True
        )
        self._server_thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(app, sock), events).result()
        self.board.on_publish.append(self._signal.notify_threadsafe)
        self._recorder.start()
        self._loop.start()
        return self

    async def _serve(self, app: web.Application, sock: socket.socket) -> None:
        from aiohttp import web

        runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        self._runner = runner

    def stop(self) -> None:
        """Stops the loop after its current frame, then the trace (the CSV complete), then the server."""
        if self._loop is not None:
            self._loop.stop(STOP_TIMEOUT_S)
        if self._recorder is not None:
            self._recorder.stop()
        if self._signal is not None and self._signal.notify_threadsafe in self.board.on_publish:
            self.board.on_publish.remove(self._signal.notify_threadsafe)
        if self._events is not None and self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._events).result()
        self._close_events()

    async def _shutdown(self) -> None:
        if self._signal is not None:
            self._signal.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _close_events(self) -> None:
        events, self._events = self._events, None
        if events is None:
            return
        events.call_soon_threadsafe(events.stop)
        if self._server_thread is not None:
            self._server_thread.join()
        events.close()

    def serve_until_signal(self, ready: Callable[[Monitor], object] | None = None) -> None:
        """Starts, calls ``ready`` (to print the address), runs until SIGINT or SIGTERM (or the
        loop fails), then stops; raises the loop's failure. The handlers are in place before the
        start, so that a signal at any moment stops cleanly."""
        stopping = threading.Event()

        def request_stop(signum: int, frame: FrameType | None) -> None:
            stopping.set()

        previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            if self._loop is None:
                self.start()
            if ready is not None:
                ready(self)
            while not stopping.wait(0.2) and self.inference.failure is None:
                pass
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.stop()
        if self.inference.failure is not None:
            raise self.inference.failure

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; a MonitorError when the address is unusable or taken."""
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        return socket.create_server(address[:2], family=family)
    except OSError as exc:
        raise MonitorError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None


def _address(sock: socket.socket) -> tuple[str, int]:
    host, port = sock.getsockname()[:2]
    return str(host), int(port)
