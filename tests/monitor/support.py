"""What the monitor's tests share: a fake detector, synthetic frames, a Monitor on an ephemeral
port, and an MJPEG reader over a plain socket."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Iterator, Sequence

from PIL import Image

from edgecnn.monitor import LoadSampler, Monitor
from edgecnn.monitor.pipeline import FrameSource
from edgecnn.vision.sources import Frame, FrameError


class FakeDetector:
    """Sleeps ``seconds`` per image (the inference) and finds nothing, or fails on frame ``fail_at``."""

    def __init__(self, seconds: float = 0.01, fail_at: int | None = None) -> None:
        self.seconds = seconds
        self.fail_at = fail_at
        self.calls = 0

    def detect(self, image: Image.Image) -> list[object]:
        if self.calls == self.fail_at:
            raise RuntimeError("the fake detector fails on purpose")
        self.calls += 1
        time.sleep(self.seconds)
        return []


def synthetic_frames(bad_every: int = 0) -> Iterator[Frame | FrameError]:
    """Endless untimed (as fast as the loop takes them) 64x48 frames whose colour changes with the index (every ``bad_every``-th unreadable)."""
    index = 0
    while True:
        if bad_every and index % bad_every == bad_every - 1:
            yield FrameError("synthetic", index, "unreadable on purpose")
        else:
            colour = (index * 37 % 256, index * 91 % 256, 128)
            yield Frame(Image.new("RGB", (64, 48), colour), "synthetic", index, None)
        index += 1


def noisy_frames() -> Iterator[Frame | FrameError]:
    """Endless 640x480 noise frames (JPEGs of a few hundred KB: a stuck client's buffers fill fast)."""
    noise = [Image.effect_noise((640, 480), 64).convert("RGB") for _ in range(4)]
    index = 0
    while True:
        yield Frame(noise[index % len(noise)], "noise", index, None)
        index += 1


def no_drawing(image: Image.Image, detections: Sequence[object]) -> Image.Image:
    return image


def fake_monitor(
    detector: FakeDetector | None = None, frames: FrameSource = synthetic_frames, **options: object
) -> Monitor:
    """A Monitor over synthetic frames with the fake detector, on 127.0.0.1 and a free port."""
    return Monitor(
        detector or FakeDetector(),
        frames,
        draw=no_drawing,
        sampler=LoadSampler(),
        info={"model": "fake", "source": "synthetic"},
        **options,  # type: ignore[arg-type]
    )


def get(url: str, timeout: float = 10) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        return reply.status, reply.headers.get("Content-Type", ""), reply.read()


def stats(monitor: Monitor, since: int = 0) -> dict[str, object]:
    _, _, body = get(f"{monitor.url}api/stats?since={since}")
    result: dict[str, object] = json.loads(body)
    return result


def open_stream(monitor: Monitor, receive_buffer: int | None = None) -> socket.socket:
    """A raw connection that has asked for the MJPEG stream (optionally with a tiny receive buffer)."""
    host, port = monitor.addresses[0]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(10)
    sock.connect((host, port))
    sock.sendall(f"GET /stream.mjpg HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    return sock


def read_jpegs(sock: socket.socket, count: int) -> list[bytes]:
    """The next ``count`` JPEG parts of an MJPEG stream (parts told apart by their JPEG markers)."""
    data = b""
    jpegs: list[bytes] = []
    while len(jpegs) < count:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        while True:
            start = data.find(b"\xff\xd8")
            end = data.find(b"\xff\xd9", start + 2)
            if start < 0 or end < 0:
                break
            jpegs.append(data[start : end + 2])
            data = data[end + 2 :]
    return jpegs
