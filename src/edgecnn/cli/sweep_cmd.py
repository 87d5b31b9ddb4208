"""`edgecnn sweep`: a model's time, FPS, energy, power and EDP at each frequency level and under the
default governor (seed 001's Fig. 5.4 and Table 5.1)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.progress import TextColumn, TimeElapsedColumn
from rich.table import Table

from edgecnn.cli.console import console, headline, measuring_progress, step
from edgecnn.cli.govern_cmd import parse_cpus
from edgecnn.errors import DeviceError

if TYPE_CHECKING:
    from edgecnn.dvfs.sweep import SweepRow

NAME = "sweep"


def parse_levels(text: str | None, available_khz: list[int]) -> list[int]:
    """``800,1600`` (MHz) -> those levels in kHz, each one the domains offer; all without a list."""
    if text is None:
        return available_khz
    try:
        wanted = [round(float(part) * 1000) for part in text.split(",")]
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is not a list of MHz such as 800,1600", param_hint="--levels"
        ) from None
    missing = [f"{khz / 1000:g}" for khz in wanted if khz not in available_khz]
    if missing:
        shown = ", ".join(f"{khz / 1000:g}" for khz in available_khz)
        raise typer.BadParameter(
            f"no level at {', '.join(missing)} MHz (available: {shown})", param_hint="--levels"
        )
    return wanted


def command(
    model: Path = typer.Argument(..., help="Model file (.onnx, .prototxt, .cfg, .bin, .ecnn)."),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights)."),
    device: str = typer.Option("cpu", help="cpu, opencl[:N] or cuda[:N] (NVIDIA clocks are only reported)."),
    levels: str | None = typer.Option(None, help="Frequencies to pin, in MHz, e.g. 800,1600 (default: all)."),
    iterations: int = typer.Option(20, "-n", "--iterations", min=1, help="Measured inferences per level."),
    warmup: int = typer.Option(2, min=0, help="Unmeasured inferences before each level's."),
    meter: str = typer.Option("auto", help="Energy meter: auto, rapl, hwmon, power_supply, nvml."),
    simulate: bool = typer.Option(
        False,
        "--simulate",
        help="No frequency control or meter here: replay one run through the processor model.",
    ),
    cpus: str | None = typer.Option(
        None, help="CPUs whose cpufreq policies are swept, e.g. 0-3 (default: all)."
    ),
    devfreq: list[str] = typer.Option([], help="A devfreq device to sweep (an integrated GPU, an NPU)."),
    threads: int | None = typer.Option(None, min=1, help="Threads (default: all cores)."),
    shape: str | None = typer.Option(None, help="Input shape for symbolic dimensions, e.g. 1x3x224x224."),
    csv: Path | None = typer.Option(None, help="Write the table to this CSV file."),
    plot: Path | None = typer.Option(
        None, help="Write Fig. 5.4 (time, energy, power per level) to this PNG."
    ),
    journal: Path | None = typer.Option(None, help="Restore journal (default: in edgecnn's cache)."),
    cpufreq_root: Path = typer.Option(Path("/sys/devices/system/cpu"), hidden=True),
    devfreq_root: Path = typer.Option(Path("/sys/class/devfreq"), hidden=True),
) -> None:
    """Pin each frequency level in turn and measure N inferences of MODEL (time, FPS, energy,
    power, EDP, PPW), and the same under the default governor, with seed 001's columns relative
    to it. Without frequency control or an energy meter it stops, unless --simulate."""
    import edgecnn
    from edgecnn.dvfs.control import FrequencyControl
    from edgecnn.dvfs.domains import Domain, select_domains
    from edgecnn.dvfs.simulate import EXYNOS5422_A15
    from edgecnn.dvfs.sweep import measured_rows, model_for_levels, simulated_rows, write_csv
    from edgecnn.energy import open_meter
    from edgecnn.runtime.feeds import random_feeds
    from edgecnn.vision.preprocess import parse_shape

    if device.startswith("cuda"):
        from edgecnn.dvfs.nvml import gpu_clocks

        clocks = gpu_clocks(int(device.partition(":")[2] or 0))
        raise DeviceError(
            f"{clocks.describes}: graphics clock {clocks.graphics_mhz} MHz (max {clocks.max_graphics_mhz}), "
            f"memory {clocks.memory_mhz} MHz; edgecnn never changes an NVIDIA GPU's clocks, so it cannot sweep them"
        )
    domains: list[Domain] = []
    try:
        domains = select_domains(
            parse_cpus(cpus), devfreq, cpufreq_root=cpufreq_root, devfreq_root=devfreq_root
        )
    except DeviceError as exc:
        if not simulate:
            raise DeviceError(f"{exc}: nothing to sweep (--simulate replays the processor model)") from None
    tables = [set(d.frequencies()) for d in domains]
    common = sorted(set.intersection(*tables)) if tables else []
    if domains and not common:
        raise DeviceError("the chosen domains share no frequency level; choose one with --cpus or --devfreq")
    energy_meter = None
    if not simulate:
        energy_meter = open_meter(meter, device)
        if not energy_meter.measured:
            raise DeviceError(
                f"no measured energy meter for {device} ({energy_meter.describes}); a sweep reports "
                "measurements only (use --simulate for the processor model's figures)"
            )
    net = edgecnn.load(model, weights, threads=threads, device=device)
    feeds = random_feeds(
        net.inputs, shapes={net.inputs[0].name: parse_shape(shape)} if shape and net.inputs else None
    )

    def run() -> None:
        net.run(feeds)

    rows: list[SweepRow]
    if not simulate:
        assert energy_meter is not None
        chosen = parse_levels(levels, common)
        console.print(
            headline(
                model, f": {len(chosen)} level(s) and the default governor, {iterations} inferences each"
            )
        )
        with (
            FrequencyControl(domains, journal=journal, log=console.print) as control,
            measuring_progress(
                TextColumn("{task.description:<18}"), TimeElapsedColumn(), disable=False
            ) as bar,
        ):
            task = bar.add_task("sweeping", total=len(chosen) + 1)
            rows = measured_rows(
                run,
                control,
                chosen,
                energy_meter,
                inferences=iterations,
                warmup=warmup,
                progress=step(bar, task),
            )
        title = f"{model.name} on {device}: measured ({energy_meter.describes})"
    else:
        processor = model_for_levels(EXYNOS5422_A15, common) if domains else EXYNOS5422_A15
        if levels is not None:
            parse_levels(levels, [round(lv.mhz * 1000) for lv in processor.levels])
        for _ in range(warmup):
            run()
        wall0, cpu0 = time.monotonic(), time.process_time()
        for _ in range(iterations):
            run()
        seconds, busy = time.monotonic() - wall0, time.process_time() - cpu0
        share = busy / (seconds * (os.cpu_count() or 1))
        if domains:
            with FrequencyControl(domains, journal=journal, log=console.print) as control:
                for khz in common:
                    for domain in domains:
                        control.pin(domain, khz)
                        state = domain.state()
                        if state.governor != "userspace" and not state.min_khz == state.max_khz == khz:
                            raise DeviceError(f"{domain.name} did not take {khz} kHz")
                    control.release()
        rows = simulated_rows(processor, iterations, seconds, share)
        if levels is not None:
            keep = {round(float(p) * 1000) for p in levels.split(",")}
            rows = [r for r in rows if r.mhz is None or round(r.mhz * 1000) in keep]
        where = f"levels pinned and restored on {cpufreq_root}, but " if domains else ""
        console.print(
            headline("SIMULATED", f": {where}time and energy are {processor.name}'s replay of {iterations} "
                     f"inferences measured here ({seconds:.2f} s, {share:.0%} of all cores busy), not measurements")
        )  # fmt: skip
        title = f"{model.name}: SIMULATED ({processor.name})"
    print_rows(rows)
    if csv is not None:
        write_csv(rows, csv)
        console.print(f"table: {csv}")
    if plot is not None:
        from edgecnn.dvfs.sweep import plot as plot_rows

        plot_rows(rows, plot, title)
        console.print(f"figure: {plot}")


def print_rows(rows: list[SweepRow]) -> None:
    from edgecnn.dvfs.sweep import COLUMNS, table

    shown = [c for c in COLUMNS if c not in ("mhz", "source", "ppw")]  # all of them in the CSV
    out = Table(box=None, header_style="bold", padding=(0, 1))
    for column in shown:
        out.add_column(column.replace("_", " "), justify="left" if column == "policy" else "right")
    for record in table(rows):
        out.add_row(*(record[c] for c in shown))
    console.print(out)
