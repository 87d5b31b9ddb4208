"""A monitor serving until a signal (what `edgecnn monitor` does) stops cleanly on SIGINT and
SIGTERM: exit status 0, the port closed, the trace CSV complete."""

from __future__ import annotations

import csv
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

TESTS = Path(__file__).parents[1]
SERVE = """
import sys
sys.path.insert(0, {tests!r})
from monitor.support import fake_monitor
fake_monitor(trace={trace!r}).serve_until_signal(lambda monitor: print(monitor.url, flush=True))
print("stopped", flush=True)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_monitor_cleanly(signum: signal.Signals, tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    child = subprocess.Popen(
        [sys.executable, "-c", SERVE.format(tests=str(TESTS), trace=str(trace))],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        with urllib.request.urlopen(url + "api/stats", timeout=10) as reply:
            assert reply.status == 200
        child.send_signal(signum)
        assert child.wait(timeout=20) == 0
        assert child.stdout.read().strip() == "stopped"
    finally:
        child.kill()
    with open(trace, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0][:2] == ["time_s", "kind"]
    assert all(len(row) == len(rows[0]) for row in rows)
    assert rows[-1][1] == "sample"  # the last sample, written at stop
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)
