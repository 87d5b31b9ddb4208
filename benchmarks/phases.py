"""edgecnn against onnxruntime through this VM's slow phases, with a probe of the transfer between cores.

On the shared 2-core VM, edgecnn's two-thread runs went 1.3x slower for a minute or two at a time
while onnxruntime's moved by a few percent (docs/tuning.md "Slow phases and the work split"). Each
window here is a child process that loads the models, then for ``--seconds`` alternates an edgecnn
run, an onnxruntime run (set up as `edgecnn bench` sets it) and a probe: one pinned thread writes a
2 MiB buffer, then a thread on the same core and one on the other core each read it back. The
other core's read time over the same core's tells a slow phase (the caches' transfer between the
cores) from a fast one. With ``--before REV`` windows alternate between REV's package and this
tree's, so both see the same phases. The table gives, per version and phase, the windows and the
medians of their edgecnn / onnxruntime ratios.

    .venv/bin/python benchmarks/phases.py --models resnet50,tiny-yolo --windows 16 --before HEAD
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np
from conv_gap import _input, _load, ort_options
from revisions import package_sources, run_child
from sections import replace_section

from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model

DOC = Path(__file__).parent.parent / "docs" / "tuning.md"
PROBE_FLOATS = 512 * 1024  # 2 MiB: past a core's L2, well inside the L3


@numba.njit(nogil=True, cache=True)
def _fill(buffer: np.ndarray, value: float) -> None:
    for i in range(buffer.shape[0]):
        buffer[i] = value


@numba.njit(nogil=True, cache=True, fastmath={"reassoc"})
def _total(buffer: np.ndarray) -> float:
    total = np.float32(0.0)
    for i in range(buffer.shape[0]):
        total += buffer[i]
    return total


def _on_core(core: int, work: Callable[[], object]) -> float:
    """Seconds ``work`` takes on a new thread bound to ``core``."""
    elapsed: list[float] = []

    def run() -> None:
        os.sched_setaffinity(0, {core})
        start = time.perf_counter()
        work()
        elapsed.append(time.perf_counter() - start)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return elapsed[0]


def transfer_probe(buffer: np.ndarray, cores: tuple[int, int]) -> tuple[float, float]:
    """(us to read ``buffer`` on the core that wrote it, us on the other core)."""
    _on_core(cores[0], lambda: _fill(buffer, 1.0))
    own = _on_core(cores[0], lambda: _total(buffer))
    _on_core(cores[0], lambda: _fill(buffer, 2.0))
    other = _on_core(cores[1], lambda: _total(buffer))
    return own * 1e6, other * 1e6


def window(models: list[str], threads: int, seconds: float) -> dict[str, dict[str, float]]:
    """One window in this process: per model, medians of edgecnn's and onnxruntime's runs and of
    the probe's two reads, all alternating for ``seconds``."""
    import onnxruntime as ort

    cores = tuple(sorted(os.sched_getaffinity(0))[:2])
    buffer = np.zeros(PROBE_FLOATS, dtype=np.float32)
    results: dict[str, dict[str, float]] = {}
    for name in models:
        model = build_model(name)
        input_name, x = _input(model)
        net = _load(model, threads)
        session = ort.InferenceSession(
            model.SerializeToString(), ort_options(threads), providers=["CPUExecutionProvider"]
        )
        net.run(x)
        session.run(None, {input_name: x})
        samples: dict[str, list[float]] = {"edgecnn": [], "onnxruntime": [], "own_us": [], "other_us": []}
        end = time.time() + seconds
        while time.time() < end:
            start = time.perf_counter()
            net.run(x)
            samples["edgecnn"].append((time.perf_counter() - start) * 1e3)
            start = time.perf_counter()
            session.run(None, {input_name: x})
            samples["onnxruntime"].append((time.perf_counter() - start) * 1e3)
            if len(cores) == 2:
                own, other = transfer_probe(buffer, cores)  # type: ignore[arg-type]
                samples["own_us"].append(own)
                samples["other_us"].append(other)
        results[name] = {key: float(np.median(values)) if values else 0.0 for key, values in samples.items()}
    return results


def table(windows: list[tuple[str, dict[str, dict[str, float]]]], slow_ratio: float) -> list[str]:
    """Per model, version and phase: windows, median edgecnn and onnxruntime ms, median ratio."""
    groups: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    for version, result in windows:
        for model, m in result.items():
            slow = m["own_us"] > 0 and m["other_us"] / m["own_us"] > slow_ratio
            groups.setdefault((model, version, "slow" if slow else "fast"), []).append(m)
    lines = [
        "| model | version | phase | windows | edgecnn ms | onnxruntime ms | edgecnn / onnxruntime | other core / own core read |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for (model, version, phase), ms in sorted(groups.items()):
        ratio = statistics.median(m["edgecnn"] / m["onnxruntime"] for m in ms)
        transfer = (
            statistics.median(m["other_us"] / m["own_us"] for m in ms if m["own_us"] > 0)
            if ms[0]["own_us"]
            else 0.0
        )
        lines.append(
            f"| {model} | {version} | {phase} | {len(ms)} | {statistics.median(m['edgecnn'] for m in ms):.2f} | "
            f"{statistics.median(m['onnxruntime'] for m in ms):.2f} | {ratio:.3f} | {transfer:.2f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--windows", type=int, default=12, help="windows per version")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of one window")
    parser.add_argument("--before", help="git revision whose windows alternate with this tree's")
    parser.add_argument(
        "--slow-ratio", type=float, default=2.0, help="other / own core read time of a slow window"
    )
    parser.add_argument("--mark", help="docs/tuning.md section to write the table into")
    parser.add_argument("--window", action="store_true", help=argparse.SUPPRESS)  # child: one window
    args = parser.parse_args()
    models = args.models.split(",")
    if args.window:
        print(json.dumps(window(models, args.threads, args.seconds)))
        return
    load = os.getloadavg()[0]
    options = ["--models", args.models, "--threads", str(args.threads), "--seconds", str(args.seconds)]
    windows: list[tuple[str, dict[str, dict[str, float]]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        sources = (
            package_sources(args.before, Path(tmp))
            if args.before
            else {"after": Path(__file__).parents[1] / "src"}
        )
        for index in range(args.windows):
            for version, source in sources.items():
                result = run_child(source, [sys.executable, __file__, "--window", *options])
                windows.append((version, result))  # type: ignore[arg-type]
                line = "  ".join(
                    f"{model} {m['edgecnn']:.2f}/{m['onnxruntime']:.2f} ms, read {m['other_us']:.0f}/{m['own_us']:.0f} us"
                    for model, m in result.items()  # type: ignore[union-attr]
                )
                print(f"window {index + 1} {version}: {line}", flush=True)
    command = " ".join(["benchmarks/phases.py", *sys.argv[1:]])
    body = [
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; batch 1, {args.threads} threads; windows of {args.seconds:g} s"
        + (f", alternating between {args.before} (before) and this tree (after)" if args.before else "")
        + f"; a window is slow where the other core's read took over {args.slow_ratio:g}x the own core's.",
        "",
        f"Command: `.venv/bin/python {command}`",
        "",
        *table(windows, args.slow_ratio),
    ]
    print("\n".join(body))
    if args.mark:
        DOC.write_text(replace_section(DOC.read_text(), args.mark, body))


if __name__ == "__main__":
    main()
