"""Is `edgecnn detect` on a video as fast as the engine's own `edgecnn time` for the same model?

Issue 31 asks that detect's throughput on a video with a tiny-YOLO-sized model be within 10% of
`edgecnn time`'s: decoding and pre-processing (the reader thread of edgecnn.vision.pipeline) and
drawing and encoding (detect's saver thread) should overlap inference, not add to it.

    .venv/bin/python lab/detect_throughput.py [--cfg yolov2-tiny] [--frames 60] [--rounds 3] [--threads N]
    .venv/bin/python lab/detect_throughput.py --frames 6 --rounds 1          # a smoke test

What it does: copies a Darknet cfg (a fixture name such as yolov2-tiny or yolov3-tiny, or a path)
at its own input size (416x416 for both), writes seeded weights in Darknet's format beside it
(``edgecnn.importers.darknet.write_random_weights``), and writes a test video with PyAV
(edgecnn.vision.video.VideoWriter: moving boxes on a textured background, --size, --frames).
Then, --rounds times, one after another so that the machine's drift touches every measurement alike,
it runs these child processes, each with --threads threads:

- `edgecnn time CFG --weights W --json --iterations FRAMES`: the median iteration (that command's
  Model.profile, per-layer timing hooks included); inference frames/s = 1000 / median ms.
- Model.run alone, without hooks, on the first video frame prepared by the detector (median ms).
- `edgecnn detect CFG VIDEO --weights W --json`: frames/s = (frames - 1) / (time from the first
  JSON line's arrival to the arrival of detect's closing summary line on stderr). Process start-up,
  model load and the first frame (plan building, compile-cache loading) are left out; the rest of
  the video, decoded, pre-processed, inferred, decoded to boxes and printed, is in.
- the same with `--save DIR`: annotated frames drawn and encoded to an MP4 (the summary line comes
  after the video file is finished, so the encoder's flush is in).
- before those, detect on a one-frame video: its CPU time (start-up, model load, the first frame)
  is taken from each detect run's to give the CPU per frame of the rest, all threads together
  (spin-waiting included): the frame rate is at most cores / that figure, and reaches it where
  detect keeps the cores busy.
- both detect runs again with each `--streams N` of ``--streams`` (default 1): detect's own choice
  for a video infers several frames side by side, each on one thread (edgecnn.vision.pipeline's
  FramesInFlight); `--streams 1` is one frame at a time on all the threads, as detect ran before.

With ``--before REV`` the detect measurements without --streams are also made with the package at git revision
REV (unpacked beside the video; its compiled kernels are cached on its first run), in the same
rounds, in alternating order: the comparison of a change to detect's threads.

``--variants nice0,nice10sw,idle`` adds one `detect --json` run per variant of the helper threads
(the frame reader and the output thread, which the package runs at normal priority): ``niceN``
raises their nice value by N, whatever the load average, with Python's default 5 ms GIL switch
interval, ``niceNsw`` with a 0.5 ms one, ``idle`` runs them under Linux's SCHED_IDLE. The child
applies the variant itself before the CLI starts (each helper thread, recognised by its name, sets
its own priority as it starts; the package has no switch for it). Neither setting is in the package:
on a quiet machine they did not make detect faster (lab/notes/2026-11-28-detect-overlap.md).

``--load N`` keeps N busy Python processes running (nice 0, this session, so the same scheduler
group as detect's threads): how detect fares when the cores are contended.

With ``--breakdown`` it first times each stage of one frame alone, in this process, one after
another (nothing overlapped): decoding, letterboxing, inference (wall and CPU time of all threads),
decoding the head with NMS, the JSON line, drawing and encoding. That says how much CPU the
helper threads need per frame against the cores' time inference leaves idle.

It prints a table of the medians over the rounds (ms per frame, frames/s, the ratio to `edgecnn
time`, the frames/s of every round) with the command, the machine line, the date and the load.
Seeded weights find dozens of boxes per frame at detect's default --score; `--score` raises it
when the drawing cost should look like a real scene's (the table says how many boxes were drawn).
Run it on a quiet machine: on a shared one the ratio mostly measures the neighbours.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from common import REPO, machine_line, package_sources

FIXTURES = Path("/work/shared/fixtures/darknet")
if not FIXTURES.is_dir():
    FIXTURES = REPO / "tests" / "fixtures" / "darknet"
SEED = 3
WARMUP = 5  # `edgecnn time`'s default
SUMMARY = re.compile(r"(\d+) frame\(s\) in ([\d.]+) s \(([\d.]+) frames/s\)")

RUN = """
import json, statistics, time
from edgecnn.vision import Detector
from edgecnn.vision.sources import open_sources
detector = Detector.load({cfg!r}, weights={weights!r}, threads={threads})
prepared = detector.prepare_frame(next(iter(open_sources([{video!r}]))))
feeds = {{detector.net.inputs[0].name: prepared.tensor}}
for _ in range({warmup}):
    detector.net.run(feeds)
times = []
for _ in range({iterations}):
    start = time.perf_counter()
    detector.net.run(feeds)
    times.append((time.perf_counter() - start) * 1e3)
print(json.dumps({{"median_ms": statistics.median(times)}}))
"""


@dataclass
class Series:
    """One measurement's rounds: ms per frame, and for detect the CLI's own rate and the boxes."""

    label: str
    ms: list[float] = field(default_factory=list)
    cli_fps: list[float] = field(default_factory=list)
    boxes_per_frame: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)  # detect's: the child's CPU per frame beyond the first

    @property
    def median_ms(self) -> float:
        return statistics.median(self.ms)


def model_files(cfg: str, folder: Path) -> tuple[Path, Path]:
    """The cfg copied into ``folder`` (a fixture name or a path) and seeded Darknet weights for it."""
    from edgecnn.importers.darknet import write_random_weights

    source = Path(cfg) if Path(cfg).suffix == ".cfg" else FIXTURES / f"{cfg}.cfg"
    target = folder / source.name
    target.write_text(source.read_text())
    weights = target.with_suffix(".weights")
    write_random_weights(target, weights, seed=SEED)
    return target, weights


def write_video(path: Path, frames: int, size: tuple[int, int]) -> None:
    """``frames`` frames at 30 frames/s: a fixed seeded texture with three boxes moving across it."""
    from PIL import Image, ImageDraw

    from edgecnn.vision.video import VideoWriter

    width, height = size
    rng = np.random.default_rng(SEED)
    ramp = np.linspace(40, 200, width, dtype=np.float32)[None, :, None]
    texture = np.clip(ramp + rng.normal(0, 25, (height, width, 3)), 0, 255).astype(np.uint8)
    colours = [(220, 40, 40), (40, 200, 60), (40, 80, 230)]
    with VideoWriter(path, rate=30.0) as writer:
        for index in range(frames):
            image = Image.fromarray(texture)
            draw = ImageDraw.Draw(image)
            for k, colour in enumerate(colours):
                x = (index * (4 + 3 * k) + k * width // 3) % width
                y = height // 4 + k * height // 5
                draw.rectangle((x, y, x + width // 6, y + height // 4), fill=colour)
            writer.write(image)


def edgecnn_command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "edgecnn", *arguments]


def time_command(cfg: Path, weights: Path, threads: int, iterations: int) -> float:
    """`edgecnn time --json`'s median iteration, ms."""
    out = subprocess.run(
        edgecnn_command(
            "time",
            str(cfg),
            "--weights",
            str(weights),
            "--threads",
            str(threads),
            "--iterations",
            str(iterations),
            "--warmup",
            str(WARMUP),
            "--json",
        ),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(json.loads(out)["median_ms"])


def run_alone(cfg: Path, weights: Path, video: Path, threads: int, iterations: int) -> float:
    """Model.run's median ms on the detector's prepared first frame, in a child process."""
    code = RUN.format(
        cfg=str(cfg),
        weights=str(weights),
        video=str(video),
        threads=threads,
        warmup=WARMUP,
        iterations=iterations,
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["median_ms"])


def detect(
    cfg: Path,
    weights: Path,
    video: Path,
    threads: int,
    frames: int,
    save: Path | None,
    score: float | None,
    source: Path | None = None,
    launch: list[str] | None = None,
    streams: int | None = None,
) -> tuple[float, float, float, float]:
    """`edgecnn detect --json [--save] [--streams N]` in a child (with the package from ``source`` if
    given): (ms per frame from the first JSON line to the closing summary (0 for one frame), the
    CLI's own frames/s, detections per frame, the child's CPU ms, user and system, all its threads);
    ``launch`` replaces `python -m edgecnn` (a helper variant's launcher)."""
    arguments = [
        "detect",
        str(cfg),
        str(video),
        "--weights",
        str(weights),
        "--threads",
        str(threads),
        "--json",
    ]
    command = [*launch, *arguments] if launch else edgecnn_command(*arguments)
    if save is not None:
        command += ["--save", str(save)]
    if score is not None:
        command += ["--score", str(score)]
    if streams is not None:
        command += ["--streams", str(streams)]
    env = {**os.environ, "PYTHONPATH": str(source)} if source is not None else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)  # children are reaped one at a time here
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None and child.stderr is not None
    errors: list[tuple[float, str]] = []

    def read_errors() -> None:
        assert child.stderr is not None
        for line in child.stderr:
            errors.append((time.perf_counter(), line))

    reader = threading.Thread(target=read_errors, daemon=True)
    reader.start()
    arrivals, boxes = [], 0
    for line in child.stdout:
        arrivals.append(time.perf_counter())
        boxes += len(json.loads(line)["detections"])
    code = child.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_ms = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e3
    reader.join()
    if code != 0:
        raise SystemExit(f"{shlex.join(command)} exited with {code}:\n" + "".join(text for _, text in errors))
    if len(arrivals) != frames:
        raise SystemExit(f"edgecnn detect printed {len(arrivals)} JSON lines for {frames} frames")
    summary = [(at, match) for at, text in errors if (match := SUMMARY.search(text))]
    if not summary:
        raise SystemExit("edgecnn detect printed no summary line:\n" + "".join(text for _, text in errors))
    ended, match = summary[-1]
    ms = (ended - arrivals[0]) * 1e3 / (frames - 1) if frames > 1 else 0.0
    return ms, float(match.group(3)), boxes / frames, cpu_ms


def stage_costs(
    cfg: Path, weights: Path, video: Path, threads: int, score: float | None
) -> dict[str, tuple[float, float, float]]:
    """Each stage of detect's per-frame work alone, in this process: {stage: (median wall ms, median
    CPU ms of the whole process, median CPU ms of the calling thread)}; the thread's figure leaves
    out other threads' work meanwhile (FFmpeg's, or the pool's workers still spinning down). Decoding and encoding run as passes of their own (FFmpeg's and
    x264's threads work ahead of the calls), so their figures are the pass's totals per frame."""
    from edgecnn.cli.detect_cmd import frame_record
    from edgecnn.vision import Detector
    from edgecnn.vision.sources import Frame, VideoPicture, open_sources
    from edgecnn.vision.video import VideoWriter, annotate

    detector = Detector.load(cfg, weights=str(weights), threads=threads, score_threshold=score or 0.25)
    costs: dict[str, list[tuple[float, float, float]]] = {}

    def timed(stage: str, work: Callable[..., Any], *args: Any, frames: int = 1) -> Any:
        time.sleep(0.005)  # the pool's workers stop spinning: the CPU time is this stage's
        wall, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
        out = work(*args)
        wall, cpu, own = time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - own
        costs.setdefault(stage, []).append((wall * 1e3 / frames, cpu * 1e3 / frames, own * 1e3 / frames))
        return out

    def decode_all() -> list[Frame]:
        return [item for item in open_sources([str(video)]) if isinstance(item, Frame)]

    frames = decode_all()  # sizes the pass below and warms the decoder's libraries
    timed("decode (PyAV, whole pass)", decode_all, frames=len(frames))
    annotated = []
    for number, frame in enumerate(frames):
        prepared = timed("letterbox (prepare_frame)", detector.prepare_frame, frame)
        inferred = timed("inference (Model.run)", detector.infer, [prepared])[0]
        timed("inference on one thread (a stream's)", detector.infer, [prepared], 1)
        if number < WARMUP:  # the first runs build the plan and warm the caches
            costs["inference (Model.run)"].pop()
            costs["inference on one thread (a stream's)"].pop()
        found = timed("head decoding + NMS (finish)", detector.finish, inferred)
        timed("JSON line", lambda f, d: json.dumps(frame_record(f, d)), frame, found)
        assert isinstance(frame.picture, VideoPicture)
        annotated.append(timed("drawing (on a copy of the YUV planes)", annotate, frame.picture, found))
    with tempfile.TemporaryDirectory() as tmp:

        def encode() -> None:
            with VideoWriter(Path(tmp) / "encoded.mp4") as writer:
                for frame, image in zip(frames, annotated):
                    writer.write(image, frame.timestamp)

        timed("encoding (x264, whole pass)", encode, frames=len(frames))
    return {
        stage: (
            statistics.median(v[0] for v in values),
            statistics.median(v[1] for v in values),
            statistics.median(v[2] for v in values),
        )
        for stage, values in costs.items()
    }


def cost_lines(costs: dict[str, tuple[float, float, float]], threads: int) -> list[str]:
    """The stage table and what it implies for overlap on ``threads`` cores."""
    lines = [
        "| stage (alone, one frame) | wall ms | CPU ms (all threads) | CPU ms (calling thread) |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {stage} | {wall:.2f} | {cpu:.2f} | {own:.2f} |" for stage, (wall, cpu, own) in costs.items()
    ]
    wall, cpu, _ = costs["inference (Model.run)"]
    helpers = {
        "--json": ["decode", "letterbox", "head decoding", "JSON"],
        "--json --save": ["decode", "letterbox", "head decoding", "JSON", "drawing", "encoding"],
    }
    lines.append("")
    lines.append(
        f"Inference: {wall:.1f} ms wall, {cpu:.1f} ms CPU on {threads} thread(s); "
        f"{max(0.0, threads * wall - cpu):.1f} ms of the cores' time left idle per frame "
        "(spin-waiting workers count as busy here)."
    )
    _, alone, _ = costs["inference on one thread (a stream's)"]
    for mode, prefixes in helpers.items():
        need = sum(c for stage, (_, c, _) in costs.items() if any(stage.startswith(p) for p in prefixes))
        bound = max(wall, (cpu + need) / threads)
        lines.append(
            f"detect {mode}: helpers need {need:.1f} ms CPU per frame; with perfect overlap a frame takes "
            f"at least max({wall:.1f}, ({cpu:.1f} + {need:.1f}) / {threads}) = {bound:.1f} ms, "
            f"{wall / bound:.0%} of Model.run's rate, one frame at a time; {threads} frames side by side, "
            f"each on one thread ({alone:.1f} ms CPU), at least ({alone:.1f} + {need:.1f}) / {threads} = "
            f"{(alone + need) / threads:.1f} ms, {cpu / (alone + need):.0%} of the rate of Model.run's "
            f"{cpu:.1f} ms of CPU on {threads} fully busy cores."
        )
    return lines


HELPERS = ("edgecnn-frame-reader", "edgecnn-outputs")
"""Name prefixes of detect's helper threads (edgecnn.vision.pipeline's reader, detect's output pool)."""

VARIANT = """
import os, sys, threading

def lower(): {lower}

sys.setswitchinterval({interval})
run = threading.Thread.run

def helper_run(self):
    if self.name.startswith({helpers!r}):
        lower()
    run(self)

threading.Thread.run = helper_run
"""


def variant_setup(variant: str) -> str:
    """The code a detect child runs before the CLI for a helper variant: ``niceN`` (the helpers'
    nice raised by N, Python's default 5 ms switch interval), ``niceNsw`` (with a 0.5 ms one) or
    ``idle`` (the helpers under SCHED_IDLE). Each helper thread changes only itself (Linux's nice
    and scheduling policy are per thread)."""
    if variant == "idle":
        lower, interval = "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))", 0.005
    else:
        name = variant.removesuffix("sw")
        if not name.startswith("nice") or not name[4:].isdigit():
            raise SystemExit(f"unknown variant {variant!r}: niceN, niceNsw or idle")
        interval = 0.0005 if variant.endswith("sw") else 0.005
        tid = "threading.get_native_id()"
        lower = (
            f"os.setpriority(os.PRIO_PROCESS, {tid}, "
            f"min(19, os.getpriority(os.PRIO_PROCESS, {tid}) + {int(name[4:])}))"
        )
    return VARIANT.format(lower=lower, interval=interval, helpers=HELPERS)


def variant_launcher(variant: str) -> list[str]:
    """A Python command line that applies ``variant``, then runs the CLI on the arguments after it."""
    main = "import sys\nfrom edgecnn.cli.app import main\nsys.argv = ['edgecnn', *sys.argv[1:]]\nmain()\n"
    return [sys.executable, "-c", variant_setup(variant) + main]


@dataclass
class Run:
    """One detect measurement: its series, the package (None: this tree), whether it saves, a helper
    variant's launcher, and detect's --streams (None: detect's own choice)."""

    series: Series
    source: Path | None = None
    save: bool = False
    launch: list[str] | None = None
    streams: int | None = None


def measure(
    args: argparse.Namespace,
    series: list[Series],
    runs: list[Run],
    files: tuple[Path, Path, Path, Path],
    folder: Path,
    threads: int,
    iterations: int,
) -> None:
    """The rounds: `edgecnn time`, Model.run, detect on the first frame alone (its CPU is the
    start-up's, taken from each detect run's), then each detect run (in reverse order every other
    round)."""
    cfg, weights, video, first = files
    for number in range(args.rounds):
        series[0].ms.append(time_command(cfg, weights, threads, iterations))
        series[1].ms.append(run_alone(cfg, weights, video, threads, iterations))
        start_up = detect(cfg, weights, first, threads, 1, None, args.score)[3]
        for run in runs if number % 2 == 0 else runs[::-1]:
            s = run.series
            saved = folder / f"saved-{number}-{len(series)}-{len(s.ms)}" if run.save else None
            ms, cli_fps, boxes, cpu_ms = detect(
                cfg,
                weights,
                video,
                threads,
                args.frames,
                saved,
                args.score,
                run.source,
                run.launch,
                run.streams,
            )
            s.ms.append(ms)
            s.cli_fps.append(cli_fps)
            s.boxes_per_frame.append(boxes)
            s.cpu_ms.append((cpu_ms - start_up) / (args.frames - 1))
        print(f"round {number + 1}/{args.rounds} done", file=sys.stderr)


def table(series: list[Series]) -> list[str]:
    reference = 1000.0 / series[0].median_ms
    lines = [
        "| measurement | ms/frame | frames/s | vs `edgecnn time` | frames/s per round | notes |",
        "|---|---:|---:|---:|---|---|",
    ]
    for s in series:
        fps = 1000.0 / s.median_ms
        rounds = " ".join(f"{1000.0 / ms:.2f}" for ms in s.ms)
        notes = ""
        if s.cli_fps:
            notes = (
                f"CPU {statistics.median(s.cpu_ms):.1f} ms/frame (rounds "
                + " ".join(f"{ms:.1f}" for ms in s.cpu_ms)
                + f"); detect's own summary {statistics.median(s.cli_fps):.2f} frames/s (first frame in); "
                f"{statistics.median(s.boxes_per_frame):.1f} boxes/frame"
            )
        lines.append(
            f"| {s.label} | {s.median_ms:.1f} | {fps:.2f} | {fps / reference:.1%} | {rounds} | {notes} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cfg", default="yolov2-tiny", help="a Darknet fixture name or a .cfg path")
    parser.add_argument("--frames", type=int, default=60, help="frames in the test video (at least 2)")
    parser.add_argument("--size", default="640x360", help="the test video's WIDTHxHEIGHT")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of all measurements")
    parser.add_argument(
        "--iterations", type=int, default=None, help="`edgecnn time` iterations per round (default: --frames)"
    )
    parser.add_argument("--threads", type=int, default=None, help="threads (default: all cores)")
    parser.add_argument(
        "--score",
        type=float,
        default=None,
        help="detect's --score (default: detect's own); seeded weights give many boxes to draw at low ones",
    )
    parser.add_argument("--no-save", action="store_true", help="skip the `detect --save DIR` measurement")
    parser.add_argument(
        "--before", default=None, help="also measure detect with the package at this git revision"
    )
    parser.add_argument("--breakdown", action="store_true", help="first time each per-frame stage alone")
    parser.add_argument(
        "--variants",
        default=None,
        help="helper variants for detect --json: niceN, niceNsw, idle (comma-separated)",
    )
    parser.add_argument(
        "--load", type=int, default=0, help="busy processes (nice 0, this session) running throughout"
    )
    parser.add_argument(
        "--streams",
        default="1",
        help="detect --streams values measured besides detect's own choice (comma-separated; '' for none)",
    )
    args = parser.parse_args()
    if args.frames < 2:
        parser.error("--frames must be at least 2")
    from edgecnn.devices import available_cores

    threads = args.threads or available_cores()
    iterations = args.iterations or args.frames
    width, height = (int(v) for v in args.size.lower().split("x"))
    started = datetime.datetime.now().astimezone()
    load_at_start = os.getloadavg()[0]
    series = [
        Series("`edgecnn time` (Model.profile, per-layer hooks)"),
        Series("Model.run on a prepared frame (no hooks)"),
    ]
    runs: list[Run] = []
    for streams in [None, *(int(v) for v in args.streams.split(",") if v.strip())]:
        option = "" if streams is None else f" --streams {streams}"
        for save in (False,) if args.no_save else (False, True):
            series.append(Series(f"`edgecnn detect --json{' --save DIR' if save else ''}{option}`"))
            runs.append(Run(series[-1], save=save, streams=streams))
    for variant in args.variants.split(",") if args.variants else []:
        series.append(Series(f"`edgecnn detect --json`, helpers {variant}"))
        runs.append(Run(series[-1], launch=variant_launcher(variant)))
    ours = list(runs)
    costs: dict[str, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="edgecnn-detect-throughput-") as tmp:
        folder = Path(tmp)
        cfg, weights = model_files(args.cfg, folder)
        video, first = folder / "test.mp4", folder / "first.mp4"
        write_video(video, args.frames, (width, height))
        write_video(first, 1, (width, height))
        if args.before:
            before = package_sources(args.before, folder)["before"]
            for run in list(runs):
                if run.launch is None and run.streams is None:  # an earlier tree may lack --streams
                    earlier = Series(f"{run.series.label} at {args.before}")
                    series.append(earlier)
                    runs.append(Run(earlier, before, run.save))
        if args.breakdown:
            costs = stage_costs(cfg, weights, video, threads, args.score)
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
        try:
            measure(args, series, runs, (cfg, weights, video, first), folder, threads, iterations)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    command = shlex.join([".venv/bin/python", "lab/detect_throughput.py", *sys.argv[1:]])
    bar = [
        f"- {run.series.label}: {series[0].median_ms / run.series.median_ms:.1%} of `edgecnn time`'s rate, "
        f"{series[1].median_ms / run.series.median_ms:.1%} of Model.run's without hooks"
        for run in ours
    ]
    lines = [
        f"# `edgecnn detect` on a video against `edgecnn time`: {cfg.name} at its cfg's input size",
        "",
        f"Video: {args.frames} frames of {width}x{height} (H.264 or MPEG-4 by PyAV); {threads} thread(s); "
        f"medians of {args.rounds} interleaved round(s); `edgecnn time` {iterations} iterations after "
        f"{WARMUP} warm-up; detect timed from its first JSON line to its closing summary; detect's CPU "
        "per frame: the child's user + system CPU less that of detect on the first frame alone, over "
        "the frames after the first.",
        "",
        *table(series),
        "",
        *([*cost_lines(costs, threads), ""] if costs else []),
        "Issue 31's bar is detect within 10% of `edgecnn time` (at least 90% of its rate):",
        *bar,
        "",
        machine_line(threads)
        + f" (load {load_at_start:.2f} at start; {args.load} busy process(es) of this session throughout)",
        f"Run {started:%Y-%m-%d %H:%M %Z}; command: `{command}`",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
