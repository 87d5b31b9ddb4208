"""The monitor over real sockets: the page, the MJPEG stream, the stats JSON, a client leaving
mid-stream, a client that never reads, loopback-only binding, a clean stop, and the loop's failure."""

from __future__ import annotations

import logging
import socket
import struct
import time
import urllib.error
from collections.abc import Iterator

import pytest

from edgecnn.monitor import Monitor, MonitorError
from monitor.support import FakeDetector, fake_monitor, get, noisy_frames, open_stream, read_jpegs, stats


@pytest.fixture
def monitor() -> Iterator[Monitor]:
    with fake_monitor() as running:
        yield running


def wait_for_frame(monitor: Monitor, seq: int = 1, timeout: float = 10) -> int:
    """Waits until ``seq`` frames are published; returns the number published."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _, frame_stats = monitor.board.latest()
        if frame_stats is not None and frame_stats.seq >= seq:
            return frame_stats.seq
        time.sleep(0.01)
    raise AssertionError(f"fewer than {seq} frames in {timeout} s")


def test_the_page_and_its_assets_are_served(monitor: Monitor) -> None:
    status, kind, body = get(monitor.url)
    assert status == 200 and kind.startswith("text/html")
    assert b'<canvas id="chart"' in body and b"/page/monitor.js" in body
    for name, expected in (("monitor.js", "text/javascript"), ("monitor.css", "text/css")):
        status, kind, _ = get(f"{monitor.url}page/{name}")
        assert status == 200 and kind.startswith(expected)
    with pytest.raises(urllib.error.HTTPError) as missing:
        get(f"{monitor.url}page/..%2Fserver.py")
    assert missing.value.code == 404


def test_the_stream_delivers_successive_frames(monitor: Monitor) -> None:
    wait_for_frame(monitor)
    with open_stream(monitor) as sock:
        jpegs = read_jpegs(sock, 4)
    assert len(jpegs) == 4
    assert len(set(jpegs)) == 4  # each part a newer frame (the colour changes with the index)
    status, kind, single = get(f"{monitor.url}frame.jpg")
    assert status == 200 and kind == "image/jpeg" and single.startswith(b"\xff\xd8")


def test_stats_and_load_samples_advance(monitor: Monitor) -> None:
    wait_for_frame(monitor)
    first = stats(monitor)
    time.sleep(0.4)
    second = stats(monitor)
    assert first["status"] == second["status"] == "running"
    assert second["frame"]["seq"] > first["frame"]["seq"]  # type: ignore[index]
    assert second["frame"]["inference_ms"] >= 10.0  # type: ignore[index]
    samples = second["samples"]
    assert isinstance(samples, list) and len(samples) >= 4
    assert len(samples[0]["cpu"]) == second["info"]["cores"]  # type: ignore[index]
    last = samples[-1]["seq"]
    newer = stats(monitor, since=last)["samples"]
    assert all(s["seq"] > last for s in newer)  # type: ignore[union-attr]


def test_a_client_leaving_mid_stream_does_not_hurt_the_server(
    monitor: Monitor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    wait_for_frame(monitor)
    for _ in range(3):
        sock = open_stream(monitor)
        assert read_jpegs(sock, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # a reset in the middle of a part
    before = wait_for_frame(monitor)
    with open_stream(monitor) as sock:
        assert len(read_jpegs(sock, 2)) == 2
    assert wait_for_frame(monitor, before + 5) > before
    assert stats(monitor)["status"] == "running"
    assert not caplog.records  # the handler ended quietly: a client leaving is no error


def publish_rate(monitor: Monitor, seconds: float) -> float:
    start = wait_for_frame(monitor)
    time.sleep(seconds)
    return (wait_for_frame(monitor) - start) / seconds


def test_a_client_that_never_reads_stalls_neither_the_loop_nor_other_clients() -> None:
    with fake_monitor(FakeDetector(seconds=0.005), noisy_frames) as monitor:
        alone = publish_rate(monitor, 1.0)
        stuck = [open_stream(monitor, receive_buffer=4096) for _ in range(3)]
        try:
            time.sleep(0.5)  # their buffers fill; their handlers wait in write()
            with_stuck = publish_rate(monitor, 1.0)
            with open_stream(monitor) as reader:
                assert len(read_jpegs(reader, 5)) == 5
            sent_to_stuck = [len(sock.recv(1 << 20)) for sock in stuck]
        finally:
            for sock in stuck:
                sock.close()
    assert with_stuck > 0.7 * alone, f"{alone:.0f} frames/s alone, {with_stuck:.0f} with stuck clients"
    assert all(0 < size < 1 << 20 for size in sent_to_stuck)  # they did get (a little of) the stream


def test_binds_to_loopback_by_default(monitor: Monitor) -> None:
    assert monitor.addresses[0][0] == "127.0.0.1"
    assert monitor.url.startswith("http://127.0.0.1:")
    outside = outside_address()
    if outside is None:
        return
    with pytest.raises(OSError), socket.create_connection((outside, monitor.addresses[0][1]), timeout=2):
        pass


def outside_address() -> str | None:
    """This machine's address on its default route, if it has one (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


def test_stop_closes_the_port_and_ends_the_threads() -> None:
    monitor = fake_monitor().start()
    wait_for_frame(monitor)
    stream = open_stream(monitor)
    assert read_jpegs(stream, 1)
    started = time.monotonic()
    monitor.stop()
    assert time.monotonic() - started < 5
    assert stream.recv(65536) == b"" or stream.recv(65536) == b""  # the stream ends
    stream.close()
    with pytest.raises(OSError):
        socket.create_connection(monitor.addresses[0], timeout=2).close()
    assert monitor.inference.ended.is_set()


def test_a_port_in_use_is_a_monitor_error(monitor: Monitor) -> None:
    with pytest.raises(MonitorError, match=r"cannot serve on 127\.0\.0\.1"):
        fake_monitor(port=monitor.addresses[0][1]).start()


def test_unreadable_frames_are_counted_and_skipped() -> None:
    from edgecnn.monitor import LoadSampler
    from monitor.support import no_drawing, synthetic_frames

    with Monitor(
        FakeDetector(), lambda: synthetic_frames(bad_every=3), draw=no_drawing, sampler=LoadSampler()
    ) as monitor:
        wait_for_frame(monitor, 6)
        frame = stats(monitor)["frame"]
    assert frame["errors"] >= 2  # type: ignore[index]
    assert frame["frame"] % 3 != 2  # type: ignore[index]


def test_a_failing_detector_is_reported_not_lost() -> None:
    with fake_monitor(FakeDetector(fail_at=2)) as monitor:
        assert monitor.inference.ended.wait(10)
        assert stats(monitor)["status"] == "failed: the fake detector fails on purpose"
        with pytest.raises(RuntimeError, match="on purpose"):
            monitor.serve_until_signal()


def test_a_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from edgecnn.monitor.errors import require

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MonitorError, match=r"needs aiohttp.*pip install 'edgecnn\[monitor\]'"):
        require("aiohttp")
