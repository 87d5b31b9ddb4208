"""Seed 001's Fig. 5.3, Table 5.1 and Fig. 5.8 for this machine, from the recorded scenario traces
(lab/governor_record.py) replayed through edgecnn.dvfs.simulate's processor model (this VM has no
cpufreq, so no frequency can be set here; the model is the seed's own big cluster).

- docs/governor-default.png (Fig. 5.3): the CNN app's load and the default (schedutil) rule's
  frequency over 10 s of the replay: the lag and the ping-pong.
- Table 5.1: the CNN trace replayed under the default rule, the lowest and the highest level and the
  level nearest the default's mean frequency, with the seed's columns relative to the default.
- docs/governor-scenes.png (Fig. 5.8): idle, browser, CNN, compile and video traces in a row under
  Algorithm 5.1 (the bundled template and threshold) over the default rule.

    .venv/bin/python lab/governor_simulate.py [--traces DIR] [--source demand]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from common import DOCS, REPO, machine_line
from edgecnn.dvfs.classifier import SceneClassifier
from edgecnn.dvfs.scenes import SceneConfig, bundled_template
from edgecnn.dvfs.simulate import EXYNOS5422_A15, Fixed, Replay, SceneAware, Schedutil, replay
from edgecnn.dvfs.sweep import DEFAULT, SweepRow, simulated_report, table
from edgecnn.dvfs.traces import LoadTrace, read_trace, regular

PERIOD = 0.05
MODEL = EXYNOS5422_A15
SCENE_ORDER = (("idle", 10.0), ("browser", 10.0), ("cnn", 30.0), ("compile", 10.0), ("video", 10.0))


def on_grid(trace: LoadTrace, seconds: float | None = None) -> np.ndarray:
    """The trace on a regular 50 ms grid (the recorder missed periods on the loaded VM)."""
    span = float(trace.seconds[-1] - trace.seconds[0]) if seconds is None else seconds
    count = min(int(span / PERIOD), int((trace.seconds[-1] - trace.seconds[0]) / PERIOD))
    grid = regular(trace.seconds, trace.load, PERIOD, count)
    if grid is None:
        raise SystemExit(f"{trace.source}: a gap too long to fill")
    return grid


def mean_mhz(run: Replay) -> float:
    return float(np.mean([MODEL.levels[i].mhz for i in run.levels]))


def table_51(load: np.ndarray, inferences: int) -> tuple[list[SweepRow], Replay]:
    default = replay(load, PERIOD, MODEL, Schedutil(), inferences=inferences)
    middle = MODEL.nearest(mean_mhz(default))
    rows = [
        SweepRow(DEFAULT, None, simulated_report(inferences, default.seconds, default.joules, MODEL.name))
    ]
    for level in (0, MODEL.top, middle):
        run = replay(load, PERIOD, MODEL, Fixed(level), inferences=inferences)
        mhz = MODEL.levels[level].mhz
        report = simulated_report(inferences, run.seconds, run.joules, MODEL.name)
        rows.append(SweepRow(f"fixed {mhz:.0f} MHz", mhz, report))
    return rows, default


def figure_53(load: np.ndarray, run: Replay, out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    span = int(10 / PERIOD)
    times = PERIOD * np.arange(span)
    fig, ax = plt.subplots(figsize=(9, 3.6), dpi=110)
    ax.plot(times, run.utilisation[:span], color="tab:blue", linewidth=1, label="utilisation (replayed)")
    ax.plot(
        times,
        load[:span],
        color="tab:blue",
        linewidth=0.6,
        alpha=0.4,
        label="load (recorded at the top level)",
    )
    ax.set_ylabel("% of all cores")
    ax.set_ylim(0, 105)
    ax.set_xlabel("time (s)")
    right = ax.twinx()
    right.step(
        times,
        [MODEL.levels[i].mhz for i in run.levels[:span]],
        where="post",
        color="tab:red",
        label="frequency",
    )
    right.set_ylabel("frequency (MHz)", color="tab:red")
    right.set_ylim(600, 1900)
    ax.set_title(title, fontsize=8)
    fig.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def figure_58(pieces: list[tuple[str, np.ndarray]], run: Replay, out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = PERIOD * np.arange(len(run.levels))
    fig, ax = plt.subplots(figsize=(10, 3.6), dpi=110)
    ax.plot(times, run.utilisation, color="tab:blue", linewidth=0.6, label="utilisation (replayed)")
    ax.set_ylabel("% of all cores")
    ax.set_ylim(0, 105)
    ax.set_xlabel("time (s)")
    right = ax.twinx()
    right.step(
        times, [MODEL.levels[i].mhz for i in run.levels], where="post", color="tab:red", label="frequency"
    )
    right.set_ylabel("frequency (MHz)", color="tab:red")
    right.set_ylim(600, 1900)
    start = 0
    for name, load in pieces:
        began = times[int(np.argmax(run.positions >= start))]  # the replay stretches busy parts
        ax.axvline(began, color="grey", linewidth=0.8)
        ax.text(began + 0.3, 103, name, fontsize=8, va="top")
        start += len(load)
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def markdown(rows: list[SweepRow]) -> list[str]:
    header = "| policy | time per inference (ms) | FPS | energy per inference (J) | power (W) | EDP (J*s) | FPS gain | energy saving | power saving |"
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for r in table(rows):
        lines.append(
            f"| {r['policy']} | {r['time_ms']} | {r['fps']} | {r['energy_j']} | {r['power_w']} | {r['edp_js']} | "
            f"{r['performance_gain'] or '-'} | {r['energy_saving'] or '-'} | {r['power_saving'] or '-'} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=REPO / "tests" / "dvfs" / "data")
    parser.add_argument("--source", default="demand", help="system, scene or demand")
    args = parser.parse_args()
    print(machine_line())
    print(f"model: {MODEL.name}; {MODEL.source}")
    cnn_trace = read_trace(args.traces / "cnn.csv", source=args.source)
    cnn = on_grid(cnn_trace)
    inferences = len(cnn_trace.inferences)
    rows, default = table_51(cnn, inferences)
    print(
        f"CNN trace: {len(cnn)} periods ({len(cnn) * PERIOD:.1f} s), {inferences} inferences, mean load {cnn.mean():.1f}%"
    )
    print(
        f"default rule: mean {mean_mhz(default):.0f} MHz, {default.switches_per_second():.2f} level changes per second; "
        f"the CNN load below 50% in {np.mean(cnn < 50):.0%} of the periods"
    )
    print("\n".join(markdown(rows)))
    figure_53(
        cnn,
        default,
        DOCS / "governor-default.png",
        f"CNN app's recorded {args.source} load replayed under the default (schedutil) rule on the {MODEL.name}; "
        f"{default.switches_per_second():.1f} level changes/s",
    )
    config = SceneConfig.load(bundled_template())
    classifier = SceneClassifier(
        config.template,
        config.threshold,
        window=config.window,
        period=PERIOD,
        psi=config.psi,
        hysteresis=config.hysteresis,
    )
    pieces = []
    for name, seconds in SCENE_ORDER:
        pieces.append((name, on_grid(read_trace(args.traces / f"{name}.csv", source=args.source), seconds)))
    aware = replay(np.concatenate([p for _, p in pieces]), PERIOD, MODEL, SceneAware(classifier))
    start = 0
    for name, load in pieces:
        mine = (aware.positions >= start) & (aware.positions < start + len(load))
        levels = aware.levels[mine]
        first = np.flatnonzero(levels == MODEL.top)
        when = f", first after {first[0] * PERIOD:.1f} s" if len(first) else ""
        print(
            f"  Algorithm 5.1 on {name}: {mine.sum() * PERIOD:.1f} s replayed, top level in "
            f"{np.mean(levels == MODEL.top):.0%} of its periods{when}"
        )
        start += len(load)
    figure_58(
        pieces,
        aware,
        DOCS / "governor-scenes.png",
        f"Algorithm 5.1 (bundled template, DTW_TH {config.threshold:g}, M {config.window}) over the default rule, "
        f"scenario traces in a row ({args.source} load), replayed on the {MODEL.name}",
    )
    print("wrote docs/governor-default.png and docs/governor-scenes.png")


if __name__ == "__main__":
    main()
