"""`edgecnn plan`'s work, without the printing: profile the devices (or reuse a saved plan), run
Algorithms 4.1/4.2 and the fine-grained extension, then run each candidate set and measure it.

Candidates compared: the chosen set, the fastest single device, the best-EDP single device (when it is
another one), the greedy all-devices set and the fine-grained per-layer plan over all devices. Each has the
seed's predicted figures (speeds add, powers add) and, when run, measured ones.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.errors import DeviceError, EdgeCNNError
from edgecnn.hetero.execute import PartitionedModel
from edgecnn.hetero.finegrained import FineResult, fine_grained, scale_to
from edgecnn.hetero.measure import hardware_groups, layer_costs, measure
from edgecnn.hetero.partition import Partition
from edgecnn.hetero.profiles import DeviceProfile, ProfileError, normalise
from edgecnn.hetero.search import SearchResult, combination_metrics, search_combination
from edgecnn.hetero.store import SavedPlan, load_plan, model_hash, save_plan
from edgecnn.hetero.transfer import LinkCost, measure_link
from edgecnn.model import Model


@dataclass
class PlanOutcome:
    """Everything `edgecnn plan` reports."""

    profiles: list[DeviceProfile]
    meters: dict[str, str]
    skipped: dict[str, str]
    result: SearchResult
    partition: Partition
    links: dict[str, LinkCost]
    fine: Partition | None
    fine_estimates: dict[str, Any]
    rows: list[dict[str, Any]]
    plan_file: Path | None = None
    reused: bool = False
    notes: list[str] = field(default_factory=list)


def profile_device(
    model: Model, device: str, feeds: Mapping[str, np.ndarray], iterations: int, warmup: int
) -> tuple[DeviceProfile, str]:
    """One device's full-inference time and energy alone (Algorithm 4.1 lines 2-6), and the meter used."""
    measured = measure(lambda: model.run(feeds), [device], iterations, warmup)
    profile = DeviceProfile(device, measured.seconds, joules=measured.joules, estimated=measured.estimated)
    return profile, measured.meters


def comparison_rows(profiles: list[DeviceProfile], result: SearchResult) -> list[dict[str, Any]]:
    """Chosen set vs fastest single device vs best-EDP single device vs greedy all-devices set (predicted)."""
    norm = {n.name: n for n in normalise(profiles)}
    by_name = {p.name: p for p in profiles}
    rows: list[dict[str, Any]] = []

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


def perf_partition(result: SearchResult, names: Sequence[str]) -> Partition:
    """Algorithm 4.2's shares for ``names`` (relative performances from the search's normalisation)."""
    perf = {n.name: n.perf for n in result.normalised}
    return Partition({name: perf[name] for name in names})


def _links(names: Sequence[str], notes: list[str]) -> dict[str, LinkCost]:
    links = {}
    for name in names:
        try:
            links[name] = measure_link(name)
        except DeviceError as exc:
            notes.append(f"{name}: copies not measured ({exc}); the fine-grained model charges none")
            links[name] = LinkCost(name)
    return links


def _fine(
    models: Mapping[str, Model],
    feeds: Mapping[str, np.ndarray],
    result: SearchResult,
    profiles: Sequence[DeviceProfile],
    links: Mapping[str, LinkCost],
    iterations: int,
) -> FineResult:
    costs = scale_to(layer_costs(models, feeds, iterations), {p.name: p.seconds for p in profiles})
    partition = perf_partition(result, [p.name for p in profiles])
    groups = hardware_groups(partition.devices)
    return fine_grained(costs, partition, {p.name: p.power for p in profiles}, links, groups)


class Planner:
    """Plans one model on a list of devices; keeps one loaded Model per device for profiling and runs."""

    def __init__(self, model: Model, feeds: Mapping[str, np.ndarray], load: Any) -> None:
        self.base = model
        self.feeds = dict(feeds)
        self._load = load  # device name -> Model (the CLI loads from the file with the same options)
        self.models: dict[str, Model] = {}

    def model_on(self, device: str) -> Model:
        if device not in self.models:
            self.models[device] = self._load(device)
        return self.models[device]

    def plan(
        self,
        devices: Sequence[str],
        threshold: float,
        iterations: int,
        warmup: int,
        *,
        replan: bool = False,
        fine: bool = True,
        save: bool = True,
    ) -> PlanOutcome:
        notes: list[str] = []
        digest = model_hash(self.base.graph)
        shapes = {k: tuple(v.shape) for k, v in self.feeds.items()}
        saved, warning = (None, None) if replan else load_plan(digest, devices, shapes)
        if warning:
            notes.append(warning)
        skipped: dict[str, str] = {}
        if saved is not None:
            profiles, meters, links = list(saved.profiles), dict(saved.meters), dict(saved.links)
            result = search_combination(profiles, edp_threshold=threshold)
            fine_partition, fine_estimates = saved.fine, dict(saved.fine_estimates)
        else:
            profiles, meters = [], {}
            for name in devices:
                try:
                    profile, meter = profile_device(self.model_on(name), name, self.feeds, iterations, warmup)
                except EdgeCNNError as exc:
                    if isinstance(exc, FileNotFoundError) or len(devices) == 1:
                        raise
                    skipped[name] = str(exc)
                    continue
                profiles.append(profile)
                meters[name] = meter
            result = search_combination(profiles, edp_threshold=threshold)
            links = _links([p.name for p in profiles], notes)
            fine_partition, fine_estimates = None, {}
            if fine and len(profiles) > 1:
                try:
                    found = _fine(
                        {p.name: self.model_on(p.name) for p in profiles},
                        self.feeds,
                        result,
                        profiles,
                        links,
                        max(3, min(iterations, 5)),
                    )
                except ProfileError as exc:
                    notes.append(f"fine-grained plan skipped: {exc}")
                else:
                    fine_partition = found.partition
                    fine_estimates = {
                        "coarse_all_devices": found.coarse.to_json(),
                        "coarse_without_transfer": found.coarse_without_transfer.to_json(),
                        "fine": found.fine.to_json(),
                        "changed_layers": list(found.changed),
                        "predicted_gain": found.improvement,
                        "hardware_groups": hardware_groups([p.name for p in profiles]),
                        "uniform": {"+".join(o): e.to_json() for o, e in found.uniform.items()},
                    }
        partition = perf_partition(result, result.chosen)
        outcome = PlanOutcome(
            profiles=profiles,
            meters=meters,
            skipped=skipped,
            result=result,
            partition=partition,
            links=links,
            fine=fine_partition,
            fine_estimates=fine_estimates,
            rows=comparison_rows(profiles, result),
            reused=saved is not None,
            notes=notes,
        )
        if fine_partition is not None and "fine" in fine_estimates:
            est = fine_estimates["fine"]
            outcome.rows.append(
                {
                    "set": "fine-grained",
                    "devices": list(fine_partition.devices),
                    "seconds": est["seconds"],
                    "joules": est["joules"],
                    "watts": est["joules"] / est["seconds"] if est["seconds"] else 0.0,
                    "edp": est["edp"],
                    "source": "predicted (per-layer times + copies)",
                    "estimated": any(p.estimated for p in profiles),
                    "layer_devices": fine_partition.to_json()["layer_devices"],
                }
            )
        if save and saved is None:
            outcome.plan_file = save_plan(
                SavedPlan(
                    model_sha256=digest,
                    devices=tuple(devices),
                    input_shapes=shapes,
                    profiles=tuple(profiles),
                    meters=meters,
                    partition=partition,
                    fine=fine_partition,
                    links=links,
                    fine_estimates=fine_estimates,
                )
            )
        elif saved is not None:
            from edgecnn.hetero.store import plan_path

            outcome.plan_file = plan_path(digest, devices, shapes)
        return outcome

    # ----------------------------------------------------------------------- measured runs
    def run_rows(self, outcome: PlanOutcome, iterations: int, warmup: int) -> None:
        """Run every compared set for real and add measured figures (and the largest difference of its
        outputs from the fastest single device's) to its row."""
        reference = self.model_on(outcome.result.reference).run(self.feeds)
        for row in outcome.rows:
            names = row["devices"]
            if row["set"] == "fine-grained" and outcome.fine is not None:
                partition: Partition | None = outcome.fine
            elif len(names) > 1:
                partition = perf_partition(outcome.result, names)
            else:
                partition = None
            try:
                if partition is None:
                    single = self.model_on(names[0])
                    got = single.run(self.feeds)
                    m = measure(functools.partial(single.run, self.feeds), names, iterations, warmup)
                else:
                    with PartitionedModel(self.base, partition, self.feeds) as runner:
                        got = runner.run(self.feeds)
                        m = measure(lambda: runner.run(self.feeds), names, iterations, warmup)
                        row["copies"] = {
                            d: {
                                k: v / max(1, runner.stats.runs)
                                for k, v in t.to_dict().items()
                                if k != "pieces"
                            }
                            for d, t in runner.stats.devices.items()
                        }
            except EdgeCNNError as exc:
                row["measured_error"] = str(exc)
                continue
            row.update(
                measured_seconds=m.seconds,
                measured_joules=m.joules,
                measured_watts=m.watts,
                measured_edp=m.edp,
                measured_estimated=m.estimated,
                measured_meters=m.meters,
                max_abs_diff=max(
                    float(np.max(np.abs(np.asarray(got[k], np.float64) - reference[k]), initial=0.0))
                    for k in reference
                ),
            )
