"""Seed 001's Fig. 5.7 for this machine: the scene template and DTW_TH chosen from the recorded
scenario traces (lab/governor_record.py), with the separation margin.

The CNN trace is cut in two: the template (the medoid 40-sample window) comes from its first half,
the CNN distances that the threshold must admit from its second half, so that the template is never
judged on the samples it was cut from. Every (M, psi) pair of the grid is tried; the one whose
threshold has the least error (choose_threshold's: CNN windows missed plus the mean share of each
other scenario's windows caught), then the largest margin relative to its threshold, is kept, saved as the bundled template
(src/edgecnn/dvfs/cnn_template.json) and plotted (docs/governor-dtw.png).

    .venv/bin/python lab/governor_scenes.py [--traces DIR] [--source demand] [--no-save]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from common import DOCS, REPO, machine_line
from edgecnn.dvfs.scenes import SceneConfig, Threshold, choose_threshold, distances, extract_template
from edgecnn.dvfs.traces import LoadTrace, read_trace

PERIOD = 0.05
SCENES = ("cnn", "idle", "compile", "video", "browser")
WINDOWS = (30, 40, 60, 80)
PSIS = (0, 5, 10, 15)
BUNDLED = REPO / "src" / "edgecnn" / "dvfs" / "cnn_template.json"


def halves(trace: LoadTrace) -> tuple[LoadTrace, LoadTrace]:
    middle = float(trace.seconds[len(trace) // 2])
    return trace.between(-1.0, middle), trace.between(middle, float("inf"))


def evaluate(
    traces: dict[str, LoadTrace], window: int, psi: int
) -> tuple[np.ndarray, dict[str, np.ndarray], Threshold, np.ndarray]:
    first, second = halves(traces["cnn"])
    template = extract_template(first, period=PERIOD, psi=psi)
    cnn = distances(second, template, window=window, period=PERIOD, psi=psi)
    others = {
        name: distances(trace, template, window=window, period=PERIOD, step=2, psi=psi)
        for name, trace in traces.items()
        if name != "cnn"
    }
    return cnn, others, choose_threshold(cnn, others), template


def plot(cnn: np.ndarray, others: dict[str, np.ndarray], threshold: Threshold, title: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["cnn", *others]
    values = [cnn, *others.values()]
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    rng = np.random.default_rng(0)
    for i, series in enumerate(values):
        ax.scatter(i + rng.uniform(-0.25, 0.25, len(series)), series, s=5, alpha=0.5)
        ax.plot([i - 0.3, i + 0.3], [np.median(series)] * 2, color="black", linewidth=1)
    ax.axhline(threshold.value, color="crimson", linestyle="--", label=f"DTW_TH = {threshold.value:.0f}")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("DTW distance to the template")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=REPO / "tests" / "dvfs" / "data")
    parser.add_argument("--source", default="demand", help="system, scene or demand")
    parser.add_argument("--no-save", action="store_true", help="print only; keep the bundled template")
    args = parser.parse_args()
    print(machine_line())
    traces = {name: read_trace(args.traces / f"{name}.csv", source=args.source) for name in SCENES}
    print(f"load source: {args.source}; {', '.join(f'{n} {len(t)} samples' for n, t in traces.items())}")
    print(
        "| M | psi | DTW_TH | CNN max | nearest other (scene) | margin | margin / DTW_TH | CNN missed | others caught |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    best = None
    for window in WINDOWS:
        for psi in PSIS:
            cnn, others, threshold, template = evaluate(traces, window, psi)
            score = (-(threshold.cnn_missed + threshold.others_caught), threshold.margin / threshold.value)
            print(
                f"| {window} | {psi} | {threshold.value:.1f} | {threshold.cnn_max:.1f} | "
                f"{threshold.other_min:.1f} ({threshold.nearest_scene}) | {threshold.margin:.1f} | {score[1]:.2f} | "
                f"{threshold.cnn_missed:.1%} | {threshold.others_caught:.1%} |"
            )
            if best is None or score > best[0]:
                best = (score, window, psi, cnn, others, threshold, template)
    assert best is not None
    _, window, psi, cnn, others, threshold, template = best
    print(
        f"chosen: M {window}, psi {psi}, DTW_TH {threshold.value:.1f}, margin {threshold.margin:.1f} "
        f"(CNN windows missed {threshold.cnn_missed:.1%}, others caught {threshold.others_caught:.1%})"
    )
    for name, series in {"cnn (2nd half)": cnn, **others}.items():
        print(
            f"  {name}: {len(series)} windows, DTW min {series.min():.1f} median {np.median(series):.1f} "
            f"max {series.max():.1f}, {np.mean(series < threshold.value):.1%} below DTW_TH"
        )
    if args.no_save:
        return
    source = (
        f"lab/governor_scenes.py on tests/dvfs/data ({args.source} load, 2-core shared VM, "
        f"{time.strftime('%Y-%m-%d')}); margin {threshold.margin:.1f}"
    )
    SceneConfig(tuple(round(float(v), 2) for v in template), round(threshold.value, 2), PERIOD, window, psi,
                round(threshold.hysteresis, 2), source).save(BUNDLED)  # fmt: skip
    title = (
        f"DTW of {window}-sample windows to the 40-sample CNN template (psi {psi}); {args.source} load of each "
        f"scenario's processes\nrecorded on a shared 2-core VM; margin {threshold.margin:.0f}"
    )
    plot(cnn, others, threshold, title, DOCS / "governor-dtw.png")
    print(f"wrote {BUNDLED.relative_to(REPO)} and docs/governor-dtw.png")


if __name__ == "__main__":
    main()
