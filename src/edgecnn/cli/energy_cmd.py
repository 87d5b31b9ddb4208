"""`edgecnn energy`: energy per inference, average power, FPS and EDP, and which meter said so."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from edgecnn.cli.console import console, headline
from edgecnn.runtime.feeds import random_feeds
from edgecnn.vision.preprocess import parse_shape

NAME = "energy"


def command(
    model: Path = typer.Argument(..., help="Model file (.onnx, .prototxt, .cfg, .bin, .ecnn)."),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights)."),
    iterations: int = typer.Option(50, min=1, help="Measured inferences."),
    warmup: int = typer.Option(3, min=0, help="Unmeasured inferences first."),
    meter: str = typer.Option("auto", help="auto, rapl, nvml, hwmon, power_supply or estimate."),
    interval: float = typer.Option(0.05, min=0.001, help="Sampling interval in seconds."),
    shape: str | None = typer.Option(None, help="Input shape for symbolic dimensions, e.g. 1x3x224x224."),
    threads: int | None = typer.Option(None, min=1, help="Threads (default: all cores)."),
    device: str = typer.Option(
        "cpu", help="cpu, opencl[:N], cuda[:N] or reference (`edgecnn devices` lists them)."
    ),
    csv: Path | None = typer.Option(None, help="Write the power samples to this CSV file."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """Measure MODEL's energy per inference (J), average power (W), FPS and EDP (J*s)."""
    import edgecnn
    from edgecnn.energy import PowerMonitor, open_meter

    net = edgecnn.load(model, weights, threads=threads, device=device)
    shapes = {net.inputs[0].name: parse_shape(shape)} if shape and net.inputs else None
    feeds = random_feeds(net.inputs, shapes=shapes, budget=net.options.budget)
    for _ in range(warmup):
        net.run(feeds)
    with PowerMonitor(open_meter(meter, device), interval=interval) as monitor:
        for _ in range(iterations):
            net.run(feeds)
    report = monitor.report(iterations)
    if csv is not None:
        monitor.write_csv(csv)
    if as_json:
        print(json.dumps({"model": str(model), **report.to_dict()}, indent=2))
        return
    kind = "measured" if report.measured else "ESTIMATED (no energy sensor found)"
    console.print(headline(model, f": {iterations} inferences, meter {report.meter} — {kind}"))
    console.print(f"  source: {report.describes}")
    console.print(
        f"  energy {report.joules_per_inference * 1e3:.3f} mJ/inference, average power {report.average_watts:.2f} W, "
        f"{report.fps:.1f} FPS, EDP {report.edp:.3e} J*s, PPW {report.ppw:.1f} inferences/J, PPJ {report.ppj:.3e}"
    )
