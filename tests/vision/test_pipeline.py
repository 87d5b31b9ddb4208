"""Frames in flight (edgecnn.vision.pipeline.FramesInFlight): results in the order frames were put in
whatever order they finish, skipped frames kept in their place, a stream's error raised, the same
boxes as one frame at a time, and the default number of streams per source kind."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from edgecnn.errors import InputError
from edgecnn.vision import Detector
from edgecnn.vision.detector import Detection, Inferred, NetworkInput, NetworkOutput, Prepared
from edgecnn.vision.pipeline import FramesInFlight, default_streams, side_by_side_is_safe


class Delay(Prepared):
    """A fake frame that takes ``seconds`` to infer, after ``gate`` opens if given."""

    def __init__(self, number: int, seconds: float, gate: threading.Event | None = None) -> None:
        self.number = number
        self.seconds = seconds
        self.gate = gate


class Done(Inferred):
    def __init__(self, number: int, thread: str, threads: int | None) -> None:
        self.number = number
        self.thread = thread
        self.threads = threads


class Sleeper(Detector):
    """Infers a :class:`Delay` by sleeping; the frame numbered ``fail`` raises."""

    description = "sleeper"
    score_threshold = 0.5
    iou_threshold = 0.5

    def __init__(self, threads: int, fail: int = -1) -> None:
        self._threads = threads
        self.fail = fail

    @property
    def threads(self) -> int:
        return self._threads

    def prepare(self, image: object) -> Prepared:
        return Delay(0, 0.0)

    def infer(self, prepared: Sequence[Prepared], threads: int | None = None) -> list[Inferred]:
        (frame,) = prepared
        assert isinstance(frame, Delay)
        if frame.gate is not None:
            assert frame.gate.wait(timeout=30)
        time.sleep(frame.seconds)
        if frame.number == self.fail:
            raise InputError(f"frame {frame.number} failed")
        return [Done(frame.number, threading.current_thread().name, threads)]

    def finish(self, inferred: Inferred) -> list[Detection]:
        return []


@pytest.fixture
def side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """As once numba's pool has started with a threading layer that allows it."""
    monkeypatch.setattr("edgecnn.vision.pipeline.side_by_side_is_safe", lambda: True)


def run_all(
    in_flight: FramesInFlight[int], frames: Sequence[Prepared | None]
) -> list[tuple[int, Inferred | None]]:
    taken = []
    for tag, frame in enumerate(frames):
        taken += in_flight.put(tag, frame)
    taken += in_flight.drain()
    in_flight.close()
    return taken


@pytest.mark.usefixtures("side_by_side")
@pytest.mark.parametrize("streams", [2, 3])
def test_results_come_back_in_order_whatever_finishes_first(streams: int) -> None:
    rng = np.random.default_rng(streams)
    frames: list[Delay | None] = [Delay(n, float(rng.uniform(0, 0.03))) for n in range(12)]
    frames[4] = frames[9] = None  # unreadable frames keep their place
    taken = run_all(FramesInFlight(Sleeper(threads=2), streams), frames)
    assert [tag for tag, _ in taken] == list(range(12))
    for tag, inferred in taken:
        if tag in (4, 9):
            assert inferred is None
        else:
            assert isinstance(inferred, Done) and inferred.number == tag
            assert inferred.thread.startswith("edgecnn-stream") and inferred.threads == 1


@pytest.mark.usefixtures("side_by_side")
def test_at_most_streams_frames_in_flight() -> None:
    in_flight: FramesInFlight[int] = FramesInFlight(Sleeper(threads=2), 2)
    first, second = threading.Event(), threading.Event()
    assert in_flight.put(0, Delay(0, 0.0, first)) == []  # nothing had to finish yet
    first.set()
    ready = in_flight.put(1, Delay(1, 0.0, second))  # two in flight: waits for the oldest only
    assert [tag for tag, _ in ready] == [0]
    second.set()
    assert [tag for tag, _ in in_flight.drain()] == [1]
    in_flight.close()


def test_one_stream_infers_in_the_callers_thread_on_all_threads() -> None:
    taken = run_all(FramesInFlight(Sleeper(threads=2), 1), [Delay(0, 0.0), None, Delay(2, 0.0)])
    assert [tag for tag, _ in taken] == [0, 1, 2]
    first = taken[0][1]
    assert isinstance(first, Done) and first.thread == threading.current_thread().name
    assert first.threads is None


def test_unsafe_threading_layer_runs_one_frame_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("edgecnn.vision.pipeline.side_by_side_is_safe", lambda: False)
    taken = run_all(FramesInFlight(Sleeper(threads=2), 3), [Delay(n, 0.0) for n in range(3)])
    assert all(isinstance(d, Done) and d.threads is None for _, d in taken)


@pytest.mark.usefixtures("side_by_side")
def test_a_streams_error_is_raised_in_order() -> None:
    in_flight: FramesInFlight[int] = FramesInFlight(Sleeper(threads=2, fail=2), 2)
    taken = []
    with pytest.raises(InputError, match="frame 2 failed"):
        for n in range(6):
            taken += in_flight.put(n, Delay(n, 0.01))
    in_flight.close()
    assert [tag for tag, _ in taken] == [0, 1]


def test_streams_must_be_positive() -> None:
    with pytest.raises(InputError, match="at least 1"):
        FramesInFlight(Sleeper(threads=2), 0)


def test_default_streams_by_source_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("edgecnn.vision.pipeline.available_cores", lambda: 4)
    assert default_streams(Sleeper(threads=4), live=True) == 1
    assert default_streams(Sleeper(threads=4), live=False) == 4
    assert default_streams(Sleeper(threads=8), live=False) == 4
    assert default_streams(Sleeper(threads=1), live=False) == 1


def test_a_yolo_model_side_by_side_gives_the_boxes_of_one_frame_at_a_time(tmp_path: Path) -> None:
    """yolov3-tiny (seeded) on several frames: two streams of one thread each, with the shared
    Model's plan entered from both at once, give bit-identical raw outputs and the same boxes."""
    from tests.vision.test_detector import noise_image, small_darknet

    cfg, weights = small_darknet(tmp_path, "yolov3-tiny")
    detector = Detector.load(cfg, weights=str(weights), threads=2, score_threshold=0.3)
    prepared = [detector.prepare(noise_image(seed=seed)) for seed in range(5)]
    alone = [detector.infer([p])[0] for p in prepared]  # starts numba's pool, as detect's first frame
    if not side_by_side_is_safe():
        pytest.skip("numba's threading layer does not allow runs from several threads")
    taken = run_all(FramesInFlight(detector, 2), prepared)
    assert [tag for tag, _ in taken] == list(range(5))
    for (_, together), one in zip(taken, alone):
        assert isinstance(together, NetworkOutput) and isinstance(one, NetworkOutput)
        for name, value in one.outputs.items():
            assert value.tobytes() == together.outputs[name].tobytes(), name
        assert detector.finish(together) == detector.finish(one)
    assert any(detector.finish(one) for one in alone)
    from edgecnn.kernels.cpu.system.threads import max_threads

    assert threads_seen_by_a_run(detector, prepared[0], None) == {min(2, max_threads())}
    assert threads_seen_by_a_run(detector, prepared[0], 1) == {1}


def threads_seen_by_a_run(detector: Detector, prepared: Prepared, threads: int | None) -> set[int]:
    """The numba thread budget each step of a run of the detector's plan saw."""
    from edgecnn.kernels.cpu.system.threads import current_threads
    from edgecnn.runtime.executor import execute

    assert isinstance(prepared, NetworkInput)
    feeds = {detector.net.inputs[0].name: prepared.tensor}
    seen: set[int] = set()

    class Budget:
        def before(self, step: object) -> None:
            seen.add(current_threads())

        def after(self, step: object, outputs: object) -> None:
            pass

    execute(detector.net.plan_for(feeds), feeds, (Budget(),), threads)
    return seen
