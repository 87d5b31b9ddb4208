"""`edgecnn monitor`: seed 001's monitoring app (sample -> infer -> draw) as a local web page."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import typer

from edgecnn.cli.console import console, error_console, headline

NAME = "monitor"
LOOPBACK = "127.0.0.1"


def sample_video() -> str:
    """The bundled sample video (the default source)."""
    return str(resources.files("edgecnn") / "data" / "monitor" / "sample.mp4")


def command(
    sources: list[str] | None = typer.Argument(
        None, help="Video files (looped), image files or folders (looped); default: the bundled sample video."
    ),
    model: Path | None = typer.Option(
        None, help="Detection model (.cfg, .onnx, ...); default: the bundled face detector."
    ),
    weights: Path | None = typer.Option(None, help="Weights file (.weights for a Darknet cfg)."),
    camera: str | None = typer.Option(
        None, help="Read a camera instead: an index (0) or a V4L2 device path."
    ),
    port: int = typer.Option(8080, min=0, max=65535, help="Port to serve on (0: any free port)."),
    host: str = typer.Option(LOOPBACK, help="Address to serve on; anything but loopback exposes the page."),
    trace: Path | None = typer.Option(None, help="Record the 50 ms load trace and frame events to this CSV."),
    threads: int | None = typer.Option(None, min=1, help="Inference threads (default: all cores)."),
) -> None:
    """Serve a live page of detection on SOURCE: annotated frames, latency, FPS, per-core load and
    the load trace (seed 001's monitoring app). Ctrl-C or SIGTERM stops it."""
    from edgecnn.monitor import Monitor
    from edgecnn.monitor.errors import require
    from edgecnn.vision.detector import Detector
    from edgecnn.vision.sources import open_sources

    for package in ("aiohttp", "psutil", "av"):
        require(package)
    paths = list(sources or [])
    if not paths and camera is None:
        paths = [sample_video()]
    if host != LOOPBACK:
        error_console.print(
            f"warning: serving on {host}, not loopback: whoever reaches this machine on port {port} "
            "sees the page and the camera's frames (there is no authentication)"
        )
    console.print(headline("loading", f" {model or 'the bundled face detector'}"))
    if model is None:
        detector = Detector.faces(threads=threads)
    else:
        detector = Detector.load(model, weights=None if weights is None else str(weights), threads=threads)
    described = ", ".join(paths + ([f"camera {camera}"] if camera is not None else []))
    monitor = Monitor(
        detector,
        lambda: open_sources(paths, camera=camera, loop=True),
        host=host,
        port=port,
        trace=trace,
        info={"model": str(model or "face detector (bundled SimpleCNN)"), "source": described},
    )
    monitor.serve_until_signal(
        lambda running: console.print(headline(running.url, f"  {described}; Ctrl-C stops"))
    )
    recorder = monitor.recorder
    if trace is not None:
        console.print(
            f"trace: {recorder.count} samples every {recorder.period * 1e3:g} ms in {trace}"
            + (f" ({recorder.missed} periods missed)" if recorder.missed else "")
        )
