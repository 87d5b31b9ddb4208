"""`edgecnn plan`: seed 001's Algorithms 4.1 and 4.2 on this machine's devices, run and explained.

Every device runs the whole model alone (time and energy), the search picks an energy-efficient set and
each chosen device gets a share of every layer's outputs. The plan is saved (keyed by the model's hash, the
devices and the input shape) and reused unless ``--replan``. Then the chosen set, the single best device,
the greedy all-devices set and the fine-grained per-layer plan are run for real (one worker thread per
device, copies included) and measured next to the seed's predicted figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from edgecnn.cli.console import console, headline, sanitize
from edgecnn.hetero.planner import Planner, PlanOutcome, comparison_rows
from edgecnn.runtime.feeds import random_feeds
from edgecnn.vision.preprocess import parse_shape

NAME = "plan"

__all__ = ["NAME", "command", "comparison_rows"]


def _to_json(model: Path, iterations: int, outcome: PlanOutcome) -> dict[str, Any]:
    result = outcome.result
    return {
        "model": str(model),
        "iterations": iterations,
        "threshold": result.threshold,
        "plan_file": str(outcome.plan_file) if outcome.plan_file else None,
        "reused_plan": outcome.reused,
        "notes": outcome.notes,
        "devices": [
            {
                "name": p.name,
                "seconds": p.seconds,
                "joules": p.energy,
                "watts": p.power,
                "edp": p.edp,
                "meter": outcome.meters.get(p.name, ""),
                "estimated": p.estimated,
            }
            for p in outcome.profiles
        ],
        "skipped": outcome.skipped,
        "chosen": list(result.chosen),
        "met_threshold": result.met_threshold,
        "shares": dict(outcome.partition.shares),
        "links": {d: link.to_json() for d, link in outcome.links.items()},
        "fine_grained": {
            "layer_devices": outcome.fine.to_json()["layer_devices"] if outcome.fine else None,
            **outcome.fine_estimates,
        },
        "explanation": result.explanation,
        "comparison": outcome.rows,
    }


def _print(model: Path, iterations: int, outcome: PlanOutcome) -> None:
    result = outcome.result
    source = f"reused {outcome.plan_file}" if outcome.reused else f"saved to {outcome.plan_file}"
    console.print(headline(model, f": EDP threshold {result.threshold:g}; plan {source}"))
    for note in outcome.notes:
        console.print(Text.assemble("  ", ("note:", "yellow"), f" {note}"))
    for name, meter in outcome.meters.items():
        console.print(f"  {name}: meter {meter}", highlight=False)
    for name, why in outcome.skipped.items():
        console.print(f"  {name}: skipped ({why})", highlight=False)
    for line in result.explanation:
        console.print(f"  {line}", highlight=False)
    console.print(f"chosen: {', '.join(result.chosen)}")
    shares = ", ".join(f"{n} {r:.3f}" for n, r in outcome.partition.shares.items())
    console.print(f"shares of every layer's outputs: {shares}", highlight=False)
    for device, link in outcome.links.items():
        if link.measured:
            console.print(
                f"  copies host<->{device}: {link.latency_s * 1e6:.1f} us + {link.bytes_per_s / 1e9:.2f} GB/s",
                highlight=False,
            )
    if outcome.fine is not None and outcome.fine_estimates:
        est = outcome.fine_estimates
        shared: dict[str, list[str]] = {}
        for device, group in est.get("hardware_groups", {}).items():
            shared.setdefault(group, []).append(device)
        for group, members in shared.items():
            if len(members) > 1:
                console.print(
                    f"  {', '.join(members)} share hardware ({group}): their busy times add", highlight=False
                )
        moved = (
            ", ".join(f"{sanitize(k)}->{'+'.join(v)}" for k, v in outcome.fine.layer_devices.items())
            or "none"
        )
        console.print(
            f"fine-grained (all devices, per-layer choice): predicted EDP {est['fine']['edp']:.4g} J*s vs "
            f"{est['coarse_all_devices']['edp']:.4g} for every layer split "
            f"({est['coarse_without_transfer']['edp']:.4g} without copies); layers moved: {moved}",
            highlight=False,
        )
    console.print(
        f"{'set':<16}{'pred s':>10}{'pred J':>10}{'pred EDP':>11}{'meas s':>10}{'meas J':>10}{'meas W':>9}"
        f"{'meas EDP':>11}{'max|diff|':>11}  devices"
    )
    for row in outcome.rows:
        measured = "measured_seconds" in row
        meas = (
            f"{row['measured_seconds']:>10.4g}{row['measured_joules']:>10.4g}{row['measured_watts']:>9.3g}"
            f"{row['measured_edp']:>11.4g}{row['max_abs_diff']:>11.2g}"
            if measured
            else f"{'-':>10}{'-':>10}{'-':>9}{'-':>11}{'-':>11}"
        )
        flags = ", energy ESTIMATED" if row["estimated"] or row.get("measured_estimated") else ""
        error = f" (run failed: {row['measured_error']})" if "measured_error" in row else ""
        console.print(
            f"{row['set']:<16}{row['seconds']:>10.4g}{row['joules']:>10.4g}{row['edp']:>11.4g}{meas}  "
            f"{'+'.join(row['devices'])}: {row['source']}{flags}{error}",
            highlight=False,
        )


def command(
    model: Path = typer.Argument(..., help="Model file (.onnx, .prototxt, .cfg, .bin, .ecnn)."),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights)."),
    edp_threshold: float = typer.Option(
        1.0, help="EDP_TH: keep dropping devices while relative EDP >= this."
    ),
    iterations: int = typer.Option(10, min=1, help="Measured inferences per device and per compared set."),
    warmup: int = typer.Option(2, min=0, help="Unmeasured inferences first."),
    devices: str | None = typer.Option(
        None, help="Comma-separated devices (default: all `edgecnn devices`)."
    ),
    shape: str | None = typer.Option(None, help="Input shape for symbolic dimensions, e.g. 1x3x224x224."),
    replan: bool = typer.Option(
        False, "--replan", help="Profile and plan again even if a saved plan exists."
    ),
    run: bool = typer.Option(True, "--run/--no-run", help="Run and measure the compared sets."),
    fine: bool = typer.Option(
        True, "--fine-grained/--no-fine-grained", help="Also plan per-layer device choice with copy costs."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """Profile MODEL on every device, pick an energy-efficient set (seed 001 Alg. 4.1), split work (4.2),
    run the partition and compare it with the single best device and all devices."""
    import edgecnn
    from edgecnn.devices import list_devices

    names = [d.strip() for d in devices.split(",")] if devices else [d.name for d in list_devices()]
    base = edgecnn.load(model, weights)
    shapes = {base.inputs[0].name: parse_shape(shape)} if shape and base.inputs else None
    feeds = random_feeds(base.inputs, shapes=shapes, budget=base.options.budget)
    planner = Planner(base, feeds, lambda device: edgecnn.load(model, weights, device=device))
    outcome = planner.plan(names, edp_threshold, iterations, warmup, replan=replan, fine=fine)
    if run:
        planner.run_rows(outcome, iterations, warmup)
    if as_json:
        print(json.dumps(_to_json(model, iterations, outcome), indent=2))
        return
    _print(model, iterations, outcome)
