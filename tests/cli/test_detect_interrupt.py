"""Ctrl-C in `edgecnn detect`: a SIGINT during a video stops after the current frame (or frames, with
several in flight) with exit code 130, whole JSON Lines in frame order and an MP4 that PyAV reads
back with every frame reported so far."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tests.cli.test_detect import FAST_FACES
from tests.vision.test_sources import write_video

av = pytest.importorskip("av")
FRAMES = 300  # about 6 s of detection: the signal lands long before the end
STARTED = 2  # JSON lines to see before the signal
TIMEOUT = 120.0


@pytest.mark.parametrize("streams", [1, 2])
def test_sigint_stops_after_the_current_frame_with_complete_outputs(tmp_path: Path, streams: int) -> None:
    video = write_video(tmp_path / "clip.mp4", frames=FRAMES)
    out = tmp_path / "out"
    stderr = tmp_path / "stderr.txt"
    command = [
        sys.executable,
        "-m",
        "edgecnn",
        "detect",
        *FAST_FACES,
        str(video),
        "--json",
        "--save",
        str(out),
        "--streams",
        str(streams),
    ]
    with stderr.open("w") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
    stdout = process.stdout
    assert stdout is not None
    lines: queue.Queue[str] = queue.Queue()  # then '' at the end, as readline()

    def read() -> None:
        for line in stdout:
            lines.put(line)
        lines.put("")

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        seen = [lines.get(timeout=TIMEOUT) for _ in range(STARTED)]
        assert "" not in seen, f"detect ended before the signal: {stderr.read_text()}"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=TIMEOUT) == 130, stderr.read_text()
    finally:
        process.kill()
    reader.join(timeout=TIMEOUT)
    rest = list(iter(lines.get_nowait, ""))
    records = [json.loads(line) for line in [*seen, *rest]]  # every line whole
    assert all(line.endswith("\n") for line in [*seen, *rest])
    assert STARTED <= len(records) < FRAMES
    assert [r["index"] for r in records] == list(range(len(records)))
    assert f"interrupted after {len(records)} frame(s)" in stderr.read_text()

    with av.open(str(out / "clip.mp4")) as container:
        times = [frame.time for frame in container.decode(video=0)]
    assert times == pytest.approx([r["timestamp"] for r in records], abs=1e-3)
