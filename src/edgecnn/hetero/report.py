"""Does the fine-grained extension help? Tables for docs/heterogeneous-planning.md.

``python -m edgecnn.hetero.report [--write docs/heterogeneous-planning.md] [--model tiny-yolo]`` prints (or
writes between the doc's ``<!-- hetero-report:begin/end -->`` markers) two tables:

1. seed 001's synthetic ODROID-XU3 example (one CPU, two GPU clusters; whole-model figures from the seed),
   spread over tiny-YOLO's layers in proportion to their work, with no copy cost (the seed's model) and
   with an assumed one;
2. this machine: `edgecnn plan`'s candidates on a small zoo model, predicted and measured.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from edgecnn.hetero.finegrained import Estimate, LayerCost, fine_grained, total_cost
from edgecnn.hetero.partition import Partition
from edgecnn.hetero.profiles import DeviceProfile
from edgecnn.hetero.search import search_combination
from edgecnn.hetero.transfer import LinkCost

SEED_PROFILES = (
    DeviceProfile("cpu", 11.94, joules=52.12),
    DeviceProfile("gpu0", 1.9, joules=1.48),
    DeviceProfile("gpu1", 4.5, watts=0.441),
)
"""Seed 001's worked example (chapter 4.4): one full tiny-YOLO inference on each ODROID-XU3 processor."""

ASSUMED_GPU_LINK = (100e-6, 1e9)
"""An assumed copy cost for the Mali clusters (100 us per copy, 1 GB/s): the seed gives none."""

BEGIN, END = "<!-- hetero-report:begin -->", "<!-- hetero-report:end -->"


def tiny_yolo_layers() -> list[tuple[str, int | None, int, int, int, bool]]:
    """(name, split units, work, bytes in, bytes out, sliced input) of seed 001's tiny-YOLO at 448 x 448.

    Work is multiply-adds for convolutions and FC layers and compared elements for pooling."""
    layers: list[tuple[str, int | None, int, int, int, bool]] = []
    side, channels = 448, 3
    for i, out in enumerate((16, 32, 64, 128, 256, 512, 1024, 1024, 1024)):
        layers.append((f"conv{i + 1}", out, side * side * out * channels * 9, 4 * side * side * channels,
                       4 * side * side * out, False))  # fmt: skip
        channels = out
        if i < 6:
            layers.append(
                (
                    f"pool{i + 1}",
                    None,
                    side * side * channels,
                    4 * side * side * channels,
                    side * side * channels,
                    False,
                )
            )  # fmt: skip  (out: a quarter of the input)
            side //= 2
    inputs = side * side * channels
    for j, out in enumerate((256, 4096, 1470)):
        layers.append((f"fc{j + 1}", out, inputs * out, 4 * inputs, 4 * out, False))
        inputs = out
    return layers


def seed_layer_costs() -> list[LayerCost]:
    """The seed's whole-model times spread over the layers by work (the same speed ratio for every layer)."""
    layers = tiny_yolo_layers()
    total = sum(work for _, _, work, _, _, _ in layers)
    return [
        LayerCost(
            name,
            {p.name: p.seconds * work / total for p in SEED_PROFILES},
            bytes_in,
            bytes_out,
            units,
            sliced,
        )
        for name, units, work, bytes_in, bytes_out, sliced in layers
    ]


def _row(label: str, estimate: Estimate, note: str = "") -> str:
    return f"| {label} | {estimate.seconds:.3f} | {estimate.joules:.3f} | {estimate.edp:.4f} | {note} |"


def seed_table() -> list[str]:
    """Markdown rows: coarse vs fine-grained plans for the seed's example, without and with copy cost."""
    result = search_combination(SEED_PROFILES)
    perf = {n.name: n.perf for n in result.normalised}
    watts = {p.name: p.power for p in SEED_PROFILES}
    layers = seed_layer_costs()
    lines = [
        "| plan | T s | E J | EDP J*s | notes |",
        "|---|---:|---:|---:|---|",
    ]
    latency, bandwidth = ASSUMED_GPU_LINK
    cases = {
        "no copy cost (seed's model)": {},
        f"copies {latency * 1e6:.0f} us + {bandwidth / 1e9:g} GB/s (assumed)": {
            g: LinkCost(g, latency, bandwidth) for g in ("gpu0", "gpu1")
        },
    }
    for case, links in cases.items():
        lines.append(f"| **{case}** | | | | |")
        for label, names in (("chosen", result.chosen), ("all devices", tuple(perf))):
            partition = Partition({n: perf[n] for n in names})
            found = fine_grained(layers, partition, watts, links)
            lines.append(_row(f"{label} {{{', '.join(names)}}}, every layer split", found.coarse))
            placed = ", ".join(f"{n}->{'+'.join(found.choice[n])}" for n in found.changed) or "none"
            lines.append(
                _row(
                    f"{label}, fine-grained",
                    found.fine,
                    f"{found.improvement:.3f}x better EDP than every layer split; layers moved: {placed}",
                )
            )
        single = total_cost(
            layers, {layer.name: ("gpu0",) for layer in layers}, Partition({"gpu0": 1.0}), watts, links
        )
        lines.append(_row("gpu0 alone", single))
    return lines


def machine_table(model_name: str, devices: Sequence[str], iterations: int) -> list[str]:
    """Markdown rows of `edgecnn plan`'s comparison on a small zoo model, run here."""
    import onnx

    import edgecnn
    from edgecnn.bench.zoo import build_model
    from edgecnn.devices import cpu_device
    from edgecnn.hetero.planner import Planner
    from edgecnn.runtime.feeds import random_feeds

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{model_name}.onnx"
        onnx.save(build_model(model_name, width=0.5, resolution=224), path)
        base = edgecnn.load(path)
        feeds = random_feeds(base.inputs)
        planner = Planner(base, feeds, lambda device: edgecnn.load(path, device=device))
        outcome = planner.plan(devices, 1.0, iterations, 2, replan=True, save=False)
        planner.run_rows(outcome, iterations, 2)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    greedy = next(row["relative_edp"] for row in outcome.rows if row["set"] == "greedy (all)")
    lines = [
        f"Model: zoo `{model_name}` at width 0.5, 224 x 224; devices {', '.join(devices)}; {iterations} runs "
        f"per row; machine: {cpu_device().label}, {os.cpu_count()} cores, "
        f"load average {load}. Energy: {next(iter(outcome.meters.values()), '')}. Algorithm 4.1 chose "
        f"{', '.join(outcome.result.chosen)}; the all-devices set's relative EDP is {greedy:.2f}.",
        "",
        "| set | devices | predicted s | predicted EDP | measured s | measured J | measured EDP | max abs diff |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in outcome.rows:
        measured = (
            f"{row['measured_seconds']:.4f} | {row['measured_joules']:.4f} | {row['measured_edp']:.3g} | "
            f"{row['max_abs_diff']:.2g}"
            if "measured_seconds" in row
            else f"- | - | - | {row.get('measured_error', '-')}"
        )
        lines.append(
            f"| {row['set']} | {'+'.join(row['devices'])} | {row['seconds']:.4f} | {row['edp']:.3g} | {measured} |"
        )
    if outcome.fine_estimates and outcome.fine is not None:
        est = outcome.fine_estimates
        moved = ", ".join(f"{k}->{'+'.join(v)}" for k, v in outcome.fine.layer_devices.items()) or "none"
        lines += [
            "",
            f"Fine-grained model (all devices): every layer split {est['coarse_all_devices']['edp']:.3g} J*s "
            f"({est['coarse_without_transfer']['edp']:.3g} without copies), per-layer choice "
            f"{est['fine']['edp']:.3g} J*s ({est['predicted_gain']:.2f}x); layers moved: {moved}.",
        ]
    return lines


def write_section(doc: Path, lines: Sequence[str]) -> None:
    """Replace the text between the markers (appending them if absent)."""
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    block = "\n".join([BEGIN, *lines, END])
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    doc.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="Write the tables into this markdown file.")
    parser.add_argument("--model", default="tiny-yolo", help="Zoo model for this machine's table.")
    parser.add_argument("--devices", default=None, help="Comma-separated devices (default: all).")
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args(argv)
    from edgecnn.devices import list_devices

    devices = args.devices.split(",") if args.devices else [d.name for d in list_devices()]
    lines = [
        "Generated by `python -m edgecnn.hetero.report --write docs/heterogeneous-planning.md`.",
        "",
        "Seed 001's synthetic example (figures are the seed's; per-layer times spread by work):",
        "",
        *seed_table(),
        "",
        "This machine:",
        "",
        *machine_table(args.model, devices, args.iterations),
    ]
    if args.write:
        write_section(args.write, lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
