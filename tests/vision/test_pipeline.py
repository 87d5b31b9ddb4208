"""The helper threads' priority (lowered where inference takes every core of a quiet machine, kept
where one is spare or the machine is busy) and the switch interval while they run."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator

import pytest
from PIL import Image

from edgecnn.devices import available_cores
from edgecnn.vision import Detector, Frame, pipeline
from edgecnn.vision.pipeline import (
    HELPER_NICE,
    QUIET_LOAD,
    SWITCH_INTERVAL,
    inference_first,
    prepared_frames,
    yield_to_inference,
)

LINUX_ONLY = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with nothing else running (the test machine's own load must not decide)."""
    monkeypatch.setattr(pipeline.os, "getloadavg", lambda: (0.0, 0.0, 0.0))


def own_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def nice_after(threads: int) -> tuple[int, int]:
    """The nice value of a fresh thread before and after ``yield_to_inference(threads)``."""
    seen: list[int] = []

    def helper() -> None:
        seen.append(own_nice())
        yield_to_inference(threads)
        seen.append(own_nice())

    thread = threading.Thread(target=helper)
    thread.start()
    thread.join()
    return seen[0], seen[1]


@LINUX_ONLY
@pytest.mark.usefixtures("quiet")
def test_helper_yields_when_inference_takes_every_core() -> None:
    before, after = nice_after(available_cores())
    assert after == min(19, before + HELPER_NICE)
    assert own_nice() == before  # only the helper thread changed, not the caller


@LINUX_ONLY
@pytest.mark.skipif(available_cores() < 2, reason="needs a core to spare")
@pytest.mark.usefixtures("quiet")
def test_helper_keeps_its_priority_with_a_core_to_spare() -> None:
    before, after = nice_after(available_cores() - 1)
    assert after == before


@LINUX_ONLY
@pytest.mark.parametrize("spare", [False, True])
@pytest.mark.usefixtures("quiet")
def test_reader_thread_priority_follows_the_detectors_threads(spare: bool) -> None:
    if spare and available_cores() < 2:
        pytest.skip("needs a core to spare")
    detector = Detector.faces(scales=(1.0,), threads=available_cores() - (1 if spare else 0))
    seen: list[int] = []

    def frames() -> Iterator[Frame]:
        for index in range(2):
            seen.append(own_nice())  # runs in the reader thread
            yield Frame(Image.new("RGB", (32, 32)), "made", index, None)

    indices = [item.index for item, _ in prepared_frames(detector, frames())]
    assert indices == [0, 1]
    base = own_nice()
    assert seen == [base if spare else min(19, base + HELPER_NICE)] * 2


@LINUX_ONLY
def test_helper_keeps_its_priority_on_a_busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = QUIET_LOAD * available_cores()
    monkeypatch.setattr(pipeline.os, "getloadavg", lambda: (busy, busy, busy))
    before, after = nice_after(available_cores())
    assert after == before


@pytest.mark.parametrize("start", [0.005, SWITCH_INTERVAL / 2])
def test_inference_first_shortens_the_switch_interval_and_restores_it(start: float) -> None:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(start)
    try:
        with inference_first():
            assert sys.getswitchinterval() == pytest.approx(min(start, SWITCH_INTERVAL))
        assert sys.getswitchinterval() == pytest.approx(start)
    finally:
        sys.setswitchinterval(previous)
