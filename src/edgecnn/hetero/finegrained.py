"""The fine-grained extension seed 001 leaves as future work: a per-layer cost model with data transfer,
and a per-layer choice of the devices that share each layer (Algorithm 4.2's split among a subset of the
devices, or the whole layer on one device).

Model (one inference = the layers in order, each layer finished before the next starts, as the executor
runs them). Device d running a fraction f of layer l is busy ``f * t_l,d`` (its measured time for the whole
layer, scaled as the seed scales work) plus one copy in and one copy out (``LinkCost``; zero for devices
on host memory). The layer takes the longest busy time; its energy is the sum of ``P_d x busy_d`` (each
device's average power while it works; idle power is not charged, as in the seed). Totals add over layers.

Choice: coordinate descent on the total predicted EDP = E x T (layer by layer, take the device subset that
lowers it, sweep until nothing changes), started from the coarse plan (every splittable layer split among
all devices, the rest on the leading device) and from "every layer on subset S" for each subset; the best
end point wins, so the result is never predicted worse than the coarse plan, any single device or any
fixed subset (Algorithm 4.1's chosen set among them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from edgecnn.hetero.partition import Partition
from edgecnn.hetero.profiles import ProfileError
from edgecnn.hetero.transfer import LinkCost

MAX_SWEEPS = 20
MAX_SUBSET_DEVICES = 6
"""Up to this many devices every subset is an option (2^n - 1 per layer); beyond, singles and all."""

Option = tuple[str, ...]
"""The devices that share a layer (one device: the whole layer)."""


@dataclass(frozen=True)
class LayerCost:
    """One layer as the model sees it: ``seconds`` on each device alone (compute only), the bytes of its
    variable inputs and of its output, and its split units (None: it cannot be split). ``sliced_input``:
    each slice reads only its share of the input (grouped convolutions)."""

    name: str
    seconds: Mapping[str, float]
    in_bytes: int
    out_bytes: int
    units: int | None = None
    sliced_input: bool = False


@dataclass(frozen=True)
class Estimate:
    """Predicted time and energy of one inference."""

    seconds: float
    joules: float

    @property
    def edp(self) -> float:
        return self.seconds * self.joules

    def to_json(self) -> dict[str, float]:
        return {"seconds": self.seconds, "joules": self.joules, "edp": self.edp}


@dataclass(frozen=True)
class FineResult:
    """The per-layer choice, its partition and predictions next to the coarse plan's."""

    partition: Partition
    choice: dict[str, Option]
    coarse: Estimate
    fine: Estimate
    coarse_without_transfer: Estimate
    changed: tuple[str, ...] = field(default=())
    uniform: dict[Option, Estimate] = field(default_factory=dict)  # every layer on one subset

    @property
    def improvement(self) -> float:
        """Predicted EDP of the coarse plan over the fine one (1.0: no gain)."""
        return self.coarse.edp / self.fine.edp if self.fine.edp > 0 else 1.0


def _links(devices: Sequence[str], links: Mapping[str, LinkCost] | None) -> dict[str, LinkCost]:
    return {d: (links or {}).get(d, LinkCost(d)) for d in devices}


def option_cost(
    layer: LayerCost,
    option: Option,
    partition: Partition,
    watts: Mapping[str, float],
    links: Mapping[str, LinkCost],
) -> Estimate:
    """Predicted (seconds, joules) of one layer shared by the devices of ``option``."""
    if len(option) > 1 and not layer.units:
        raise ProfileError(f"layer {layer.name!r} cannot be split")
    if len(option) == 1:
        fractions = {option[0]: 1.0}
    else:
        assert layer.units
        counts = Partition(partition.shares, {layer.name: option}).counts(layer.name, layer.units)
        fractions = {d: c / layer.units for d, c in counts.items() if c > 0}
    busiest, joules = 0.0, 0.0
    for device, fraction in fractions.items():
        if device not in layer.seconds:
            raise ProfileError(f"layer {layer.name!r} has no time measured on {device!r}")
        link = links[device]
        read = layer.in_bytes * (fraction if layer.sliced_input else 1.0)
        busy = (
            fraction * layer.seconds[device] + link.seconds(read) + link.seconds(layer.out_bytes * fraction)
        )
        busiest = max(busiest, busy)
        joules += watts[device] * busy
    return Estimate(busiest, joules)


def subsets(devices: Sequence[str]) -> list[Option]:
    """Every non-empty subset in partition order (singles and the full set only for many devices)."""
    if len(devices) > MAX_SUBSET_DEVICES:
        return [(d,) for d in devices] + [tuple(devices)]
    return [c for k in range(1, len(devices) + 1) for c in combinations(devices, k)]


def _layer_option(layer: LayerCost, option: Option, partition: Partition) -> Option:
    """What ``option`` means for this layer: a layer that cannot be split runs on the subset's fastest device."""
    if layer.units or len(option) == 1:
        return option
    return (Partition(partition.shares, {layer.name: option}).whole_device(layer.name),)


def coarse_choice(layers: Sequence[LayerCost], partition: Partition) -> dict[str, Option]:
    """Algorithm 4.2 as written: split what can be split among all devices, the rest on the leading device."""
    return {layer.name: _layer_option(layer, partition.devices, partition) for layer in layers}


def total_cost(
    layers: Sequence[LayerCost],
    choice: Mapping[str, Option],
    partition: Partition,
    watts: Mapping[str, float],
    links: Mapping[str, LinkCost] | None = None,
) -> Estimate:
    """Sum of the layers' predicted times and energies under ``choice``."""
    table = _links(partition.devices, links)
    seconds = joules = 0.0
    for layer in layers:
        cost = option_cost(layer, choice[layer.name], partition, watts, table)
        seconds += cost.seconds
        joules += cost.joules
    return Estimate(seconds, joules)


def fine_grained(
    layers: Sequence[LayerCost],
    partition: Partition,
    watts: Mapping[str, float],
    links: Mapping[str, LinkCost] | None = None,
) -> FineResult:
    """Per-layer device choice (see the module docstring) for ``partition``'s devices and shares."""
    table = _links(partition.devices, links)
    options = subsets(partition.devices)
    costs = {
        layer.name: {
            o: option_cost(layer, o, partition, watts, table) for o in options if layer.units or len(o) == 1
        }
        for layer in layers
    }
    coarse = coarse_choice(layers, partition)
    starts = {o: {layer.name: _layer_option(layer, o, partition) for layer in layers} for o in options}
    uniform = {o: _descend(layers, start, costs, sweeps=0)[1] for o, start in starts.items()}
    found = [_descend(layers, coarse, costs)] + [_descend(layers, start, costs) for start in starts.values()]
    choice, best = min(found, key=lambda item: item[1].edp)  # ties keep the earlier: the coarse start
    overrides = {n: o for n, o in choice.items() if o != coarse[n]}
    zero = {d: LinkCost(d) for d in partition.devices}
    return FineResult(
        partition=Partition(partition.shares, overrides),
        choice=choice,
        coarse=total_cost(layers, coarse, partition, watts, table),
        fine=best,
        coarse_without_transfer=total_cost(layers, coarse, partition, watts, zero),
        changed=tuple(overrides),
        uniform=uniform,
    )


def _descend(
    layers: Sequence[LayerCost],
    start: Mapping[str, Option],
    costs: Mapping[str, Mapping[Option, Estimate]],
    sweeps: int = MAX_SWEEPS,
) -> tuple[dict[str, Option], Estimate]:
    """Coordinate descent on the total EDP from ``start``: each layer takes its best option given the others."""
    choice = dict(start)
    seconds = sum(costs[n][o].seconds for n, o in choice.items())
    joules = sum(costs[n][o].joules for n, o in choice.items())
    for _ in range(sweeps):
        improved = False
        for layer in layers:
            current = costs[layer.name][choice[layer.name]]
            base_t, base_e = seconds - current.seconds, joules - current.joules
            best, best_edp = choice[layer.name], seconds * joules
            for option, cost in costs[layer.name].items():
                edp = (base_t + cost.seconds) * (base_e + cost.joules)
                if edp < best_edp * (1 - 1e-9):
                    best, best_edp = option, edp
            if best != choice[layer.name]:
                new = costs[layer.name][best]
                seconds, joules = base_t + new.seconds, base_e + new.joules
                choice[layer.name] = best
                improved = True
        if not improved:
            break
    return choice, Estimate(seconds, joules)
