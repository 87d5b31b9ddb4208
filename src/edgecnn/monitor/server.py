"""The monitor's web server (aiohttp): the page and its assets, the annotated frames as an MJPEG
stream, the newest frame alone, and the stats and load samples as JSON.

aiohttp because it serves a long-lived stream per client on one event loop with backpressure per
connection: a client that stops reading blocks only its own handler's ``write``, and each handler
sends the newest frame when its client is ready for one, dropping the frames in between."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from importlib import resources

from aiohttp import web

from edgecnn.monitor.pipeline import LatestFrame
from edgecnn.monitor.trace import TraceRecorder

PAGE_FILES = {
    "index.html": "text/html",
    "monitor.js": "text/javascript",
    "monitor.css": "text/css",
}
BOUNDARY = "edgecnn-frame"
MAX_SAMPLES_PER_REPLY = 600


class FrameSignal:
    """Wakes the stream handlers when the loop publishes a frame; lives on the server's event loop,
    and ``notify_threadsafe`` is what the loop's thread calls (it only schedules the wake-up)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.closing = False
        self._event = asyncio.Event()

    def notify_threadsafe(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._wake)

    def close(self) -> None:
        """Ends every stream (called on the event loop)."""
        self.closing = True
        self._wake()

    def _wake(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self) -> None:
        await self._event.wait()


def build_app(
    board: LatestFrame,
    recorder: TraceRecorder,
    signal: FrameSignal,
    info: dict[str, object],
    status: Callable[[], str],
) -> web.Application:
    """The application; ``info`` describes the run (model, source, sensors) for the page."""
    page = resources.files("edgecnn.monitor") / "page"

    async def asset(request: web.Request) -> web.Response:
        name = request.match_info.get("name", "index.html")
        if name not in PAGE_FILES:
            raise web.HTTPNotFound()
        return web.Response(
            body=(page / name).read_bytes(),
            content_type=PAGE_FILES[name],
            headers={"Cache-Control": "no-cache"},
        )

    async def frame(request: web.Request) -> web.Response:
        jpeg, _ = board.latest()
        if jpeg is None:
            raise web.HTTPServiceUnavailable(text="no frame yet")
        return web.Response(body=jpeg, content_type="image/jpeg", headers={"Cache-Control": "no-store"})

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": f"multipart/x-mixed-replace; boundary={BOUNDARY}",
                "Cache-Control": "no-store",
            }
        )
        await response.prepare(request)
        sent = 0
        try:
            while not signal.closing:
                jpeg, stats = board.latest()
                if jpeg is None or stats is None or stats.seq == sent:
                    await signal.wait()
                    continue
                sent = stats.seq
                head = f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(jpeg)}\r\n\r\n"
                await response.write(head.encode() + jpeg + b"\r\n")
        except ConnectionError:  # the client went away mid-stream (reset, or lost while draining)
            pass
        return response

    async def stats(request: web.Request) -> web.Response:
        try:
            since = int(request.query.get("since", "0"))
        except ValueError:
            raise web.HTTPBadRequest(text="since must be an integer") from None
        samples = recorder.samples_since(since)[-MAX_SAMPLES_PER_REPLY:]
        _, frame_stats = board.latest()
        return web.json_response(
            {
                "status": status(),
                "info": info,
                "frame": None if frame_stats is None else frame_stats.to_dict(),
                "samples": [{"seq": n, **sample.to_dict()} for n, sample in samples],
                "trace": {"count": recorder.count, "missed": recorder.missed, "period_s": recorder.period},
            }
        )

    app = web.Application()
    app.router.add_get("/", asset)
    app.router.add_get("/page/{name}", asset)
    app.router.add_get("/frame.jpg", frame)
    app.router.add_get("/stream.mjpg", stream)
    app.router.add_get("/api/stats", stats)
    return app
