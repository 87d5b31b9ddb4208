"""Benchmark output: the console table, docs/benchmarks.md and its JSON sidecar.

The markdown is generated; a hand-written block between NOTES_BEGIN and NOTES_END in an existing
file is carried over on regeneration, so findings written next to the numbers survive a re-run."""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path
from typing import Any

from rich.table import Table

from edgecnn.bench.machine import machine_summary
from edgecnn.bench.runner import BASELINE_ENGINE, REFERENCE_ENGINE, TOLERANCE, BenchResult, Measurement

NOTES_BEGIN = "<!-- notes: hand-written, kept when the file is regenerated -->"
NOTES_END = "<!-- end of notes -->"
COLUMNS = (
    "model",
    "batch",
    "engine",
    "min ms",
    "median ms",
    "max ms",
    "spread",
    "x onnxruntime",
    "GFLOP/s",
    "% GEMM peak",
    "max rel err",
)


def measurement_row(result: BenchResult, m: Measurement) -> list[str]:
    """One table row; an engine that failed shows its error in place of the numbers."""
    if not m.ok:
        return [
            m.model,
            str(m.batch),
            m.engine,
            "failed: " + (m.error or "no runs"),
            *[""] * (len(COLUMNS) - 4),
        ]
    ratio = result.ratio(m)
    peak = result.gemm_peak_gflops
    error = "reference" if m.engine == REFERENCE_ENGINE else _error_text(m)
    return [
        m.model,
        str(m.batch),
        m.engine,
        f"{m.min_ms:.2f}",
        f"{m.median_ms:.2f}",
        f"{m.max_ms:.2f}",
        f"{100 * m.spread:.0f}%",
        "" if ratio is None else f"{ratio:.2f}",
        f"{m.gflops:.1f}",
        f"{100 * m.gflops / peak:.0f}%" if peak else "",
        error,
    ]


def _error_text(m: Measurement) -> str:
    if m.max_rel_error is None:
        return "not checked"
    text = f"{m.max_rel_error:.1e}"
    return f"**{text} (> {TOLERANCE:g})**" if m.flagged else text


def console_table(result: BenchResult) -> Table:
    table = Table(header_style="bold", box=None)
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("model", "engine") else "right")
    previous = None
    for m in result.measurements:
        if previous is not None and (m.model, m.batch) != previous:
            table.add_section()
        previous = (m.model, m.batch)
        table.add_row(*(cell.replace("**", "") for cell in measurement_row(result, m)))
    return table


def ratio_summary(
    result: BenchResult, engine: str = REFERENCE_ENGINE, statistic: str = "median"
) -> dict[int, tuple[dict[str, float], float]]:
    """Per batch: {model: engine's latency / onnxruntime's} and their geometric mean."""
    by_batch: dict[int, dict[str, float]] = {}
    for m in result.measurements:
        ratio = result.ratio(m, statistic)
        if m.engine == engine and ratio is not None:
            by_batch.setdefault(m.batch, {})[m.model] = ratio
    return {
        batch: (ratios, math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios)))
        for batch, ratios in sorted(by_batch.items())
    }


def noise_summary(result: BenchResult) -> dict[str, tuple[float, float, str]]:
    """Per engine: the median and the largest spread (IQR / median of the rounds) over its cases,
    and the case with the largest: how far apart two runs of the same code may land."""
    by_engine: dict[str, list[tuple[float, str]]] = {}
    for m in result.measurements:
        if m.ok and len(m.times_ms) > 1:
            by_engine.setdefault(m.engine, []).append((m.spread, f"{m.model} b{m.batch}"))
    summary = {}
    for engine, spreads in by_engine.items():
        worst = max(spreads)
        summary[engine] = (statistics.median(s for s, _ in spreads), worst[0], worst[1])
    return summary


def noise_lines(result: BenchResult) -> list[str]:
    """One line per engine for the console and the markdown."""
    return [
        f"{engine}: median spread {100 * median:.0f}%, largest {100 * worst:.0f}% ({case})"
        for engine, (median, worst, case) in noise_summary(result).items()
    ]


def _ratio_text(ratio: float | None, digits: int = 2) -> str:
    return "-" if ratio is None else f"{ratio:.{digits}f}"


def comparison_rows(comparison: dict[str, Any]) -> list[list[str]]:
    """model, batch, before, now, change: per case, then one geometric-mean row per batch."""
    rows = [
        [
            str(row["model"]),
            str(row["batch"]),
            _ratio_text(row["before"]),
            _ratio_text(row["now"]),
            _ratio_text(row["change"], 3),
        ]
        for row in comparison.get("rows", [])
    ]
    for batch, means in comparison.get("geometric_means", {}).items():
        rows.append(
            [
                "geometric mean",
                batch,
                *(_ratio_text(means[k]) for k in ("before", "now")),
                _ratio_text(means["change"], 3),
            ]
        )
    return rows


COMPARISON_COLUMNS = ("model", "batch", "before", "now", "change")


def comparison_heading(comparison: dict[str, Any]) -> str:
    isa = comparison.get("isa")
    isa_text = "/".join(isa) if isinstance(isa, list) and isa else "ISA not recorded"
    other = (
        ""
        if comparison.get("same_cpu")
        else f", on another or unrecorded machine: {comparison.get('cpu')}, {isa_text}"
    )
    return (
        f"edgecnn / onnxruntime against {comparison.get('file')} ({comparison.get('date')}{other});"
        " change = now / before, < 1: edgecnn gained"
    )


def comparison_table(comparison: dict[str, Any]) -> Table:
    table = Table(header_style="bold", box=None)
    for column in COMPARISON_COLUMNS:
        table.add_column(column, justify="left" if column == "model" else "right")
    for row in comparison_rows(comparison):
        table.add_row(*row)
    return table


def comparison_markdown(comparison: dict[str, Any]) -> list[str]:
    lines = ["## Against an earlier run", "", comparison_heading(comparison) + ".", ""]
    lines += ["| " + " | ".join(COMPARISON_COLUMNS) + " |", "|---|" + "---:|" * (len(COMPARISON_COLUMNS) - 1)]
    lines += ["| " + " | ".join(row) + " |" for row in comparison_rows(comparison)]
    return [*lines, ""]


def summary_tables(result: BenchResult) -> list[str]:
    """Per batch, one line per model: latency ratios to onnxruntime of edgecnn (median and min) and of each peer."""
    peers = [
        e
        for e in dict.fromkeys(m.engine for m in result.measurements)
        if e not in (REFERENCE_ENGINE, BASELINE_ENGINE)
    ]
    medians = {e: ratio_summary(result, e) for e in [REFERENCE_ENGINE, *peers]}
    mins = ratio_summary(result, REFERENCE_ENGINE, "min")
    lines: list[str] = []
    for batch, (ratios, geomean) in medians[REFERENCE_ENGINE].items():
        header = [
            "model",
            "edgecnn ms",
            "onnxruntime ms",
            "edgecnn / ORT (median)",
            "(min)",
            *[f"{p} / ORT" for p in peers],
        ]
        lines += [
            f"Batch {batch}:",
            "",
            "| " + " | ".join(header) + " |",
            "|---|" + "---:|" * (len(header) - 1),
        ]
        for model, ratio in ratios.items():
            ours, base = (_find(result, model, batch, e) for e in (REFERENCE_ENGINE, BASELINE_ENGINE))
            cells = [model, f"{ours.median_ms:.2f}", f"{base.median_ms:.2f}", f"**{ratio:.2f}**"]
            cells.append(f"{mins[batch][0][model]:.2f}")
            cells += [_cell(medians[p].get(batch, ({}, 0.0))[0].get(model)) for p in peers]
            lines.append("| " + " | ".join(cells) + " |")
        geo = ["geometric mean", "", "", f"**{geomean:.2f}**", f"{mins[batch][1]:.2f}"]
        geo += [_cell(medians[p][batch][1] if batch in medians[p] else None) for p in peers]
        lines += ["| " + " | ".join(geo) + " |", ""]
    return lines


def _find(result: BenchResult, model: str, batch: int, engine: str) -> Measurement:
    return next(m for m in result.measurements if (m.model, m.batch, m.engine) == (model, batch, engine))


def _cell(ratio: float | None) -> str:
    return "" if ratio is None else f"{ratio:.2f}"


def to_markdown(result: BenchResult, chart_name: str | None, notes: str = "") -> str:
    s = result.settings
    machine = result.machine
    engines, simd = machine.get("engines", {}), machine.get("simd", [])
    assert isinstance(engines, dict) and isinstance(simd, list)
    lines = [
        "# Benchmarks: edgecnn side by side with other CPU inference engines",
        "",
        "Generated by `edgecnn bench` (src/edgecnn/bench); regenerate it with the command below rather than editing",
        "the numbers by hand.",
        "",
        "## How it was run",
        "",
        *[f"    {c}" for c in result.commands],
        "",
        f"- Date: {result.date}",
        f"- CPU: {machine_summary(machine)}; /proc/cpuinfo flags: {', '.join(simd) or 'none found'}",
        f"- OS: {machine.get('os')}; Python {machine.get('python')}; numpy {machine.get('numpy')} (BLAS: {machine.get('blas')})",
        "- Engines: " + ", ".join(f"{name} {version}" for name, version in engines.items()),
        f"- Load average (1/5/15 min) before / after: {machine.get('load_average_before')} / {machine.get('load_average')}"
        " (anything above 0 is other work sharing the cores)",
        f"- Environment: {machine.get('environment')} (set by `edgecnn bench` unless already set: with several"
        " OpenMP runtimes in one process, idle spinning workers of one engine steal the cores of the next);"
        " onnxruntime's own pool spins only while a run is under way (its default; session.force_spinning_stop=1"
        " stops it when the run returns)",
    ]
    lines += [f"- Not run: {name}: {reason}" for name, reason in result.skipped_engines.items()]
    lines += [
        f"- Threads: {s.threads} for every engine; {s.rounds} timed runs per engine after {s.warmup} untimed warm-up"
        " runs, interleaved round-robin (each round starts at a different engine); input: seeded N(0, 1) float32.",
        f"- Models: built by `edgecnn.bench.zoo` with seeded random weights (width x{s.width:g}"
        + (f", {s.resolution}px input" if s.resolution else ", native input sizes")
        + "); ratio = median latency / onnxruntime's median on the same model and batch (< 1 is faster).",
        f"- GEMM peak: {result.gemm_peak_gflops:.1f} GFLOP/s (np.matmul float32 1024x1024x1024 on {s.threads}"
        " BLAS threads, best of 5 before and 5 after the run); GFLOP/s = 2 x MACs / median time, MACs from edgecnn's static analysis.",
        f"- Outputs: each engine's output vs edgecnn's, max |diff| / max |edgecnn|; above {TOLERANCE:g} is in bold.",
        "- Noise: spread = interquartile range / median of an engine's timed runs on one case; "
        + ("; ".join(noise_lines(result)) or "fewer than two rounds, not measured"),
        "",
    ]
    summary = summary_tables(result)
    if summary:
        lines += ["## Latency relative to onnxruntime (< 1: faster than onnxruntime)", "", *summary]
    if result.comparison:
        lines += comparison_markdown(result.comparison)
    if chart_name:
        lines += [f"![median latency relative to onnxruntime]({chart_name})", ""]
    lines += ["## Results", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(measurement_row(result, m)) + " |" for m in result.measurements]
    if result.skipped_cases:
        lines += [
            "",
            "Not run: " + "; ".join(f"{c.model} batch {c.batch} ({c.skipped})" for c in result.skipped_cases),
        ]
    lines += ["", NOTES_BEGIN, notes.strip("\n"), NOTES_END, ""]
    return "\n".join(lines)


def existing_notes(path: Path) -> str:
    """The hand-written notes block of an earlier version of the file, or ''."""
    if not path.exists():
        return ""
    match = re.search(re.escape(NOTES_BEGIN) + r"\n(.*?)" + re.escape(NOTES_END), path.read_text(), re.DOTALL)
    return match.group(1) if match else ""
