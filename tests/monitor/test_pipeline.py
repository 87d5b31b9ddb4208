"""The loop's pacing: video frames held to their timestamps, late ones dropped, loops restarting."""

from __future__ import annotations

import time

import pytest

from edgecnn.monitor.pipeline import FramePacer


def test_untimed_frames_pass_at_once() -> None:
    waits: list[float] = []
    pacer = FramePacer(waits.append)
    assert all(pacer.due(None) for _ in range(3))
    assert waits == []


def test_timed_frames_wait_for_their_timestamp() -> None:
    waits: list[float] = []
    pacer = FramePacer(waits.append)
    assert pacer.due(0.0)
    assert pacer.due(0.1)
    assert waits == [pytest.approx(0.1, abs=0.01)]


def test_frames_a_frame_interval_late_are_dropped_and_a_loop_restarts_the_clock() -> None:
    pacer = FramePacer(time.sleep)
    assert pacer.due(5.0)
    time.sleep(0.25)  # inference ran long
    assert not pacer.due(5.1)  # 0.15 s late, interval 0.1 s
    assert pacer.due(5.25)  # due now: within one interval of its time
    assert pacer.due(0.0)  # the video looped: the clock starts again
