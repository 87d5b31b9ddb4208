"""The fine-grained extension seed 001 leaves as future work: a per-layer cost model with data transfer,
and a per-layer choice between Algorithm 4.2's split and running the whole layer on one device.

Model (one inference = the layers in order, each layer finished before the next starts, as the executor
runs them). Device d running a fraction f of layer l is busy ``f * t_l,d`` (its measured time for the whole
layer, scaled as the seed scales work) plus one copy in and one copy out (``LinkCost``; zero for devices
on host memory). The layer takes the longest busy time; its energy is the sum of ``P_d x busy_d`` (each
device's average power while it works; idle power is not charged, as in the seed). Totals add over layers.

Choice: coordinate descent on the total predicted EDP = E x T (layer by layer, take the option that lowers
it, sweep until nothing changes), started from the coarse plan (every splittable layer split, the rest on
the leading device) and from "every layer on device d" for each d; the best end point wins, so the result
is never predicted worse than the coarse plan or any single device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from edgecnn.hetero.partition import Partition
from edgecnn.hetero.profiles import ProfileError
from edgecnn.hetero.transfer import LinkCost

SPLIT = "split"
MAX_SWEEPS = 20


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
    choice: dict[str, str]
    coarse: Estimate
    fine: Estimate
    coarse_without_transfer: Estimate
    changed: tuple[str, ...] = field(default=())
    singles: dict[str, Estimate] = field(default_factory=dict)  # every layer whole on one device

    @property
    def improvement(self) -> float:
        """Predicted EDP of the coarse plan over the fine one (1.0: no gain)."""
        return self.coarse.edp / self.fine.edp if self.fine.edp > 0 else 1.0


def _links(devices: Sequence[str], links: Mapping[str, LinkCost] | None) -> dict[str, LinkCost]:
    return {d: (links or {}).get(d, LinkCost(d)) for d in devices}


def option_cost(
    layer: LayerCost,
    option: str,
    partition: Partition,
    watts: Mapping[str, float],
    links: Mapping[str, LinkCost],
) -> Estimate:
    """Predicted (seconds, joules) of one layer under ``option``: SPLIT, or a device name (whole layer)."""
    if option == SPLIT:
        if layer.units is None:
            raise ProfileError(f"layer {layer.name!r} cannot be split")
        counts = Partition(partition.shares).counts(layer.name, layer.units)
        fractions = {d: c / layer.units for d, c in counts.items() if c > 0} if layer.units else {}
    else:
        fractions = {option: 1.0}
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


def coarse_choice(layers: Sequence[LayerCost], partition: Partition) -> dict[str, str]:
    """Algorithm 4.2 as written: split what can be split, everything else on the leading device."""
    return {layer.name: SPLIT if layer.units else partition.lead for layer in layers}


def total_cost(
    layers: Sequence[LayerCost],
    choice: Mapping[str, str],
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
    options = {layer.name: ([SPLIT] if layer.units else []) + list(partition.devices) for layer in layers}
    costs = {
        layer.name: {o: option_cost(layer, o, partition, watts, table) for o in options[layer.name]}
        for layer in layers
    }
    coarse = coarse_choice(layers, partition)
    starts = [coarse] + [{layer.name: device for layer in layers} for device in partition.devices]
    singles = {
        device: _descend(layers, start, costs, sweeps=0)[1]
        for device, start in zip(partition.devices, starts[1:])
    }
    choice, best = min((_descend(layers, start, costs) for start in starts), key=lambda found: found[1].edp)
    # A whole-layer choice needs an override unless it is where the layer runs anyway (unsplittable, on the lead).
    overrides = {
        n: o for n, o in choice.items() if o != SPLIT and (coarse[n] == SPLIT or o != partition.lead)
    }
    fine_partition = Partition(partition.shares, overrides)
    zero = {d: LinkCost(d) for d in partition.devices}
    return FineResult(
        partition=fine_partition,
        choice=choice,
        coarse=total_cost(layers, coarse, partition, watts, table),
        fine=best,
        coarse_without_transfer=total_cost(layers, coarse, partition, watts, zero),
        changed=tuple(n for n in choice if choice[n] != coarse[n]),
        singles=singles,
    )


def _descend(
    layers: Sequence[LayerCost],
    start: Mapping[str, str],
    costs: Mapping[str, Mapping[str, Estimate]],
    sweeps: int = MAX_SWEEPS,
) -> tuple[dict[str, str], Estimate]:
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
