"""`edgecnn bench`: edgecnn side by side with every installed peer engine on the benchmark zoo."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.progress import TextColumn, TimeElapsedColumn

from edgecnn.cli.console import console, error_console, headline, measuring_progress, step
from edgecnn.errors import InputError

if TYPE_CHECKING:  # the bench modules load onnx and numpy: imported only when the command runs
    from edgecnn.bench.runner import BenchResult, BenchSettings

NAME = "bench"


def _names(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def _batches(text: str) -> list[int]:
    try:
        batches = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise InputError(f"--batch takes comma-separated integers, got {text!r}") from None
    if not batches or min(batches) < 1:
        raise InputError(f"--batch needs batch sizes >= 1, got {text!r}")
    return list(dict.fromkeys(batches))


def command(
    models: str | None = typer.Option(None, help="Comma-separated zoo models (default: all; see --list)."),
    batch: str = typer.Option("1,8", help="Comma-separated batch sizes."),
    threads: int | None = typer.Option(None, min=1, help="Threads for every engine (default: all cores)."),
    rounds: int = typer.Option(10, min=1, help="Timed runs per engine, interleaved round-robin."),
    warmup: int = typer.Option(3, min=0, help="Untimed runs per engine first."),
    engines: str | None = typer.Option(None, help="Comma-separated engines (default: every installed one)."),
    output: Path | None = typer.Option(
        None, help="Write markdown here, with a .png chart and .json data beside it."
    ),
    update: bool = typer.Option(
        False, "--update", help="Keep the rows of --output's cases this run does not cover."
    ),
    cache: Path | None = typer.Option(
        None, help="Where built models are cached (default: ~/.cache/edgecnn/bench)."
    ),
    width: float = typer.Option(
        1.0, min=0.01, help="Channel multiplier of the zoo models (< 1: quick smoke runs)."
    ),
    resolution: int | None = typer.Option(
        None, min=8, help="Input side for every zoo model (default: native)."
    ),
    compare: Path | None = typer.Option(
        None,
        help="An earlier run's JSON (--json, or --output's .json): its ratios beside this run's, with the change.",
    ),
    list_models: bool = typer.Option(False, "--list", help="List the zoo models and engines, then exit."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """Benchmark edgecnn against every installed peer (onnxruntime, OpenVINO, ncnn, MNN, PyTorch)."""
    from edgecnn.bench.peers import quiet_thread_pools, select_engines
    from edgecnn.bench.runner import BenchSettings, cases, run_benchmark, runs_per_case
    from edgecnn.bench.zoo import MODELS, default_cache_dir, zoo_entry
    from edgecnn.runtime.options import available_cores

    if list_models:
        _print_catalogue()
        return
    previous = None
    if compare is not None:
        from edgecnn.bench.compare import load_result

        previous = load_result(compare)  # a bad file fails before anything runs
    quiet_thread_pools()  # before any engine (or edgecnn's own kernels) starts a thread pool
    chosen, skipped = select_engines(_names(engines))
    if not any(e.name == "edgecnn" for e in chosen):
        raise InputError(
            "--engines must include edgecnn: it is the reference every output is checked against"
        )
    names = _names(models) or list(MODELS)
    for name in names:
        zoo_entry(name)  # unknown names fail before anything runs
    settings = BenchSettings(
        models=names,
        batches=_batches(batch),
        threads=threads or available_cores(),
        rounds=rounds,
        warmup=warmup,
        width=width,
        resolution=resolution,
    )
    cache_dir = cache or default_cache_dir()
    total = sum(runs_per_case(settings, chosen) for c in cases(settings) if not c.skipped)
    with measuring_progress(
        TextColumn("{task.description:<22}"), TimeElapsedColumn(), disable=as_json
    ) as progress:
        task = progress.add_task("preparing", total=total)
        result = run_benchmark(settings, chosen, skipped, cache_dir, step(progress, task))
    result.commands = [_command_line(settings, engines, output, update, cache, width, resolution, compare)]
    if previous is not None and compare is not None:
        from edgecnn.bench.compare import comparison

        result.comparison = comparison(result, previous, compare)
    if output is not None:
        result = _write(result, output, update)
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
        return
    _print_result(result, output)


def _command_line(
    s: BenchSettings,
    engines: str | None,
    output: Path | None,
    update: bool,
    cache: Path | None,
    width: float,
    resolution: int | None,
    compare: Path | None,
) -> str:
    """The command that reproduces this run, every default spelled out."""
    args = ["edgecnn", "bench", "--models", ",".join(s.models), "--batch", ",".join(map(str, s.batches))]
    args += ["--threads", str(s.threads), "--rounds", str(s.rounds), "--warmup", str(s.warmup)]
    if engines:
        args += ["--engines", engines]
    if width != 1.0:
        args += ["--width", f"{width:g}"]
    if resolution:
        args += ["--resolution", str(resolution)]
    if output is not None:
        args += ["--output", str(output)]
    if update:
        args.append("--update")
    if compare is not None:
        args += ["--compare", str(compare)]
    return shlex.join(args)


def _write(result: BenchResult, output: Path, update: bool) -> BenchResult:
    """Markdown, chart and JSON; with ``update``, merged with the rows already in the JSON."""
    from edgecnn.bench.chart import draw_chart
    from edgecnn.bench.report import existing_notes, to_markdown
    from edgecnn.bench.runner import BenchResult

    data_path, chart_path = output.with_suffix(".json"), output.with_suffix(".png")
    if update and data_path.exists():
        result = result.merged_into(BenchResult.from_dict(json.loads(data_path.read_text())))
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        draw_chart(result, chart_path)
        chart_name: str | None = chart_path.name
    except ValueError as exc:
        error_console.print(f"no chart: {exc}")
        chart_name = None
    output.write_text(to_markdown(result, chart_name, existing_notes(output)))
    data_path.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    return result


def _print_result(result: BenchResult, output: Path | None) -> None:
    from edgecnn.bench.machine import machine_summary
    from edgecnn.bench.report import (
        comparison_heading,
        comparison_table,
        console_table,
        noise_lines,
        ratio_summary,
    )

    machine = result.machine
    console.print(
        headline(
            "edgecnn bench",
            f": {result.settings.threads} thread(s), "
            f"{result.settings.rounds} rounds after {result.settings.warmup} warm-up; "
            f"GEMM peak {result.gemm_peak_gflops:.1f} GFLOP/s",
        )
    )
    console.print(f"machine: {machine_summary(machine)}", markup=False, highlight=False)
    console.print(
        f"load average before / after: {machine.get('load_average_before')} / {machine.get('load_average')}",
        markup=False,
        highlight=False,
    )
    for name, reason in result.skipped_engines.items():
        console.print(f"not run: {name}: {reason}")
    # Piped output gets rich's 80 columns, which would cut every number short: print the table wider.
    table_console = (
        console if console.is_terminal else Console(width=150, highlight=False, markup=False, file=sys.stdout)
    )
    table_console.print(console_table(result))
    for batch, (_, geomean) in ratio_summary(result).items():
        console.print(f"batch {batch}: edgecnn / onnxruntime geometric mean {geomean:.2f}x")
    console.print("noise (spread: IQR / median of the rounds):")
    for line in noise_lines(result):
        console.print(f"  {line}", markup=False, highlight=False)
    if result.comparison:
        console.print(comparison_heading(result.comparison), markup=False, highlight=False)
        table_console.print(comparison_table(result.comparison))
    if output is not None:
        console.print(f"wrote {output}, {output.with_suffix('.png')}, {output.with_suffix('.json')}")


def _print_catalogue() -> None:
    from edgecnn.bench.peers import ENGINES
    from edgecnn.bench.zoo import MODELS

    for name, entry in MODELS.items():
        console.print(f"{name:<15} {entry.description}")
    for name, engine_type in ENGINES.items():
        reason = engine_type().available()
        console.print(f"engine {name:<12} {'available' if reason is None else reason}")
