"""`edgecnn plan`: seed 001's Algorithms 4.1 and 4.2 on this machine's devices, explained.

Every device runs the whole model alone (time and energy), the search picks an energy-efficient set and each
chosen device gets a share of every layer's outputs. Partitioned concurrent execution is not implemented yet, so
figures for multi-device sets are the seed's model (speeds add, powers add), labelled "predicted".
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from edgecnn.cli.console import console
from edgecnn.errors import DeviceError, EdgeCNNError
from edgecnn.hetero import DeviceProfile, SearchResult, combination_metrics, normalise, search_combination
from edgecnn.hetero.split import split_ratios
from edgecnn.runtime.feeds import random_feeds
from edgecnn.vision.preprocess import parse_shape

NAME = "plan"


def measure_device(
    model: Path, weights: Path | None, device: str, iterations: int, warmup: int, shape: str | None
) -> tuple[DeviceProfile, str]:
    """One device's full-inference time and energy, and which meter produced the energy."""
    import edgecnn
    from edgecnn.energy import PowerMonitor, open_meter

    net = edgecnn.load(model, weights, device=device)
    shapes = {net.inputs[0].name: parse_shape(shape)} if shape and net.inputs else None
    feeds = random_feeds(net.inputs, shapes=shapes)
    for _ in range(warmup):
        net.run(feeds)
    try:
        meter = open_meter("auto", device)
        fallback = ""
    except DeviceError as exc:
        # No sensor known for this kind of device (e.g. PoCL's opencl:N): the labelled CPU-time estimate still
        # lets the search run, and the report says the figure is an estimate.
        meter = open_meter("estimate", device)
        fallback = f" (auto meter unavailable: {exc})"
    with PowerMonitor(meter) as monitor:
        net.profile(feeds, iterations=iterations, warmup=0)
    report = monitor.report(iterations)
    kind = "measured" if report.measured else "ESTIMATED"
    profile = DeviceProfile(
        device,
        report.seconds_per_inference,
        joules=report.joules_per_inference,
        estimated=not report.measured,
    )
    return profile, f"{report.meter} ({kind}): {report.describes}{fallback}"


def comparison_rows(profiles: list[DeviceProfile], result: SearchResult) -> list[dict[str, object]]:
    """Chosen set vs fastest single device vs best-EDP single device vs greedy all-devices set."""
    norm = {n.name: n for n in normalise(profiles)}
    by_name = {p.name: p for p in profiles}
    rows: list[dict[str, object]] = []

    def add(label: str, names: tuple[str, ...]) -> None:
        m = combination_metrics([norm[n] for n in names])
        single = len(names) == 1
        rows.append(
            {
                "set": label,
                "devices": list(names),
                "seconds": m.seconds,
                "joules": m.joules,
                "watts": m.watts,
                "edp": m.edp,
                "relative_edp": m.rel_edp,
                "source": "measured alone" if single else "predicted (speeds add, powers add)",
                "estimated": any(by_name[n].estimated for n in names),
            }
        )

    add("chosen", result.chosen)
    add("fastest single", (result.reference,))
    best = min(profiles, key=lambda p: p.edp).name
    if best != result.reference:
        add("best-EDP single", (best,))
    add("greedy (all)", tuple(p.name for p in profiles))
    return rows


def command(
    model: Path = typer.Argument(..., help="Model file (.onnx, .prototxt, .cfg, .bin, .ecnn)."),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights)."),
    edp_threshold: float = typer.Option(
        1.0, help="EDP_TH: keep dropping devices while relative EDP >= this."
    ),
    iterations: int = typer.Option(10, min=1, help="Measured inferences per device."),
    warmup: int = typer.Option(2, min=0, help="Unmeasured inferences per device first."),
    devices: str | None = typer.Option(
        None, help="Comma-separated devices (default: all `edgecnn devices`)."
    ),
    shape: str | None = typer.Option(None, help="Input shape for symbolic dimensions, e.g. 1x3x224x224."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """Profile MODEL on every device, pick an energy-efficient set (seed 001 Alg. 4.1) and split work (4.2)."""
    from edgecnn.devices import list_devices

    names = [d.strip() for d in devices.split(",")] if devices else [d.name for d in list_devices()]
    profiles: list[DeviceProfile] = []
    meters: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            profile, meter = measure_device(model, weights, name, iterations, warmup, shape)
        except EdgeCNNError as exc:
            if isinstance(exc, FileNotFoundError) or len(names) == 1:
                raise
            skipped[name] = str(exc)
            continue
        profiles.append(profile)
        meters[name] = meter
    result = search_combination(profiles, edp_threshold=edp_threshold)
    rows = comparison_rows(profiles, result)
    ratios = dict(zip(result.chosen, split_ratios(result.perf), strict=True))
    if as_json:
        out = {
            "model": str(model),
            "threshold": result.threshold,
            "devices": [
                {
                    "name": p.name,
                    "seconds": p.seconds,
                    "joules": p.energy,
                    "watts": p.power,
                    "edp": p.edp,
                    "meter": meters[p.name],
                    "estimated": p.estimated,
                }
                for p in profiles
            ],
            "skipped": skipped,
            "chosen": list(result.chosen),
            "met_threshold": result.met_threshold,
            "shares": ratios,
            "explanation": result.explanation,
            "comparison": rows,
        }
        print(json.dumps(out, indent=2))
        return
    console.print(
        f"[bold]{model}[/bold]: {iterations} inferences per device, EDP threshold {result.threshold:g}"
    )
    for name, meter in meters.items():
        console.print(f"  {name}: meter {meter}")
    for name, why in skipped.items():
        console.print(f"  {name}: skipped ({why})")
    for line in result.explanation:
        console.print(f"  {line}")
    console.print(f"chosen: {', '.join(result.chosen)}")
    console.print("shares of every layer's outputs: " + ", ".join(f"{n} {r:.3f}" for n, r in ratios.items()))
    console.print(f"{'set':<18}{'time s':>10}{'energy J':>12}{'power W':>10}{'EDP J*s':>12}  source")
    for row in rows:
        flag = ", energy ESTIMATED" if row["estimated"] else ""
        console.print(
            f"{row['set']:<18}{row['seconds']:>10.4g}{row['joules']:>12.4g}{row['watts']:>10.4g}"
            f"{row['edp']:>12.4g}  {'+'.join(row['devices'])}: {row['source']}{flag}",  # type: ignore[arg-type]
            highlight=False,
        )
