"""The fine-grained extension seed 001 leaves as future work: a per-layer cost model with data transfer,
and a per-layer choice of the devices that share each layer (Algorithm 4.2's split among a subset of the
devices, or the whole layer on one device).

Model (one inference = the layers in order, each layer finished before the next starts, as the executor
runs them). Device d running a fraction f of layer l is busy ``f * t_l,d`` (its measured time for the whole
layer, scaled as the seed scales work) plus its copies (``LinkCost``; none for devices on host memory),
as the executor makes them: a slice copies its input in and its output out; a layer run whole on a device
copies its input in unless the previous layer ran whole on that same device, and its output stays there
until a layer elsewhere (or the end of the run) needs it, which then pays that copy out. "Previous" is
the previous step: exact for chains, an approximation where branches meet. The layer takes the longest busy
time (devices that share hardware, e.g. the CPU backend and an OpenCL driver on the same CPU, add their busy
times instead); its energy is the sum of ``P_d x busy_d`` (each device's average power while it works; idle power is
not charged, as in the seed). Totals add over layers.

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


def scale_to(layers: Sequence[LayerCost], totals: Mapping[str, float]) -> list[LayerCost]:
    """Layer times scaled so each device's sum equals its whole-inference time (``totals``): the per-step
    overhead a layer profile leaves out is spread over the layers, and predictions share the profiles' basis."""
    sums = {d: sum(layer.seconds.get(d, 0.0) for layer in layers) for d in totals}
    factors = {d: (totals[d] / sums[d] if sums[d] > 0 else 1.0) for d in totals}
    return [
        LayerCost(
            layer.name,
            {d: t * factors.get(d, 1.0) for d, t in layer.seconds.items()},
            layer.in_bytes,
            layer.out_bytes,
            layer.units,
            layer.sliced_input,
        )
        for layer in layers
    ]


def _links(devices: Sequence[str], links: Mapping[str, LinkCost] | None) -> dict[str, LinkCost]:
    return {d: (links or {}).get(d, LinkCost(d)) for d in devices}


def _fractions(layer: LayerCost, option: Option, partition: Partition) -> dict[str, float]:
    if len(option) == 1:
        return {option[0]: 1.0}
    if not layer.units:
        raise ProfileError(f"layer {layer.name!r} cannot be split")
    counts = Partition(partition.shares, {layer.name: option}).counts(layer.name, layer.units)
    return {d: c / layer.units for d, c in counts.items() if c > 0}


def option_cost(
    layer: LayerCost,
    option: Option,
    partition: Partition,
    watts: Mapping[str, float],
    links: Mapping[str, LinkCost],
    previous: tuple[LayerCost, Option] | None = None,
    last: bool = False,
    groups: Mapping[str, str] | None = None,
) -> Estimate:
    """Predicted (seconds, joules) of one layer shared by the devices of ``option``, after ``previous``
    (the previous layer and its option; None: the layer reads the model's input, on the host). ``last``:
    the model's output is copied back after this layer. ``groups``: devices with the same group name share
    their hardware (e.g. the CPU backend and a CPU OpenCL driver), so their busy times add instead of
    overlapping."""
    fractions = _fractions(layer, option, partition)
    for device in fractions:
        if device not in layer.seconds:
            raise ProfileError(f"layer {layer.name!r} has no time measured on {device!r}")
    seconds = joules = 0.0
    if previous is not None:
        prev_layer, prev_option = previous
        held = prev_option[0] if len(prev_option) == 1 else None
        if held is not None and option != prev_option:  # the previous output leaves its device first
            copy = (links.get(held) or LinkCost(held)).seconds(prev_layer.out_bytes)
            seconds, joules = copy, watts[held] * copy
        resident = held is not None and option == prev_option
    else:
        resident = False
    whole = len(option) == 1
    group_busy: dict[str, float] = {}
    for device, fraction in fractions.items():
        link = links.get(device) or LinkCost(device)
        read = 0.0 if resident else layer.in_bytes * (fraction if layer.sliced_input else 1.0)
        written = layer.out_bytes * fraction if (not whole or last) else 0.0
        busy = fraction * layer.seconds[device] + link.seconds(read) + link.seconds(written)
        group = (groups or {}).get(device, device)
        group_busy[group] = group_busy.get(group, 0.0) + busy
        joules += watts[device] * busy
    return Estimate(seconds + max(group_busy.values()), joules)


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


class _Costs:
    """Memoised option costs of a layer sequence: layer i's cost depends on its option and layer i-1's."""

    def __init__(
        self,
        layers: Sequence[LayerCost],
        partition: Partition,
        watts: Mapping[str, float],
        links: Mapping[str, LinkCost],
        groups: Mapping[str, str] | None = None,
    ) -> None:
        self.layers, self.partition, self.watts, self.links = list(layers), partition, watts, links
        self.groups = dict(groups or {})
        self._memo: dict[tuple[int, Option | None, Option], Estimate] = {}

    def cost(self, index: int, prev: Option | None, option: Option) -> Estimate:
        key = (index, prev, option)
        found = self._memo.get(key)
        if found is None:
            previous = None if index == 0 or prev is None else (self.layers[index - 1], prev)
            last = index == len(self.layers) - 1
            layer = self.layers[index]
            found = option_cost(
                layer, option, self.partition, self.watts, self.links, previous, last, self.groups
            )
            self._memo[key] = found
        return found

    def total(self, choice: Sequence[Option]) -> Estimate:
        seconds = joules = 0.0
        for i, option in enumerate(choice):
            cost = self.cost(i, choice[i - 1] if i else None, option)
            seconds += cost.seconds
            joules += cost.joules
        return Estimate(seconds, joules)

    def around(self, choice: Sequence[Option], i: int, option: Option) -> Estimate:
        """Cost of layers i and i+1 (the only ones layer i's option affects) with ``option`` at i."""
        cost = self.cost(i, choice[i - 1] if i else None, option)
        if i + 1 < len(choice):
            after = self.cost(i + 1, option, choice[i + 1])
            return Estimate(cost.seconds + after.seconds, cost.joules + after.joules)
        return cost


def total_cost(
    layers: Sequence[LayerCost],
    choice: Mapping[str, Option],
    partition: Partition,
    watts: Mapping[str, float],
    links: Mapping[str, LinkCost] | None = None,
    groups: Mapping[str, str] | None = None,
) -> Estimate:
    """Sum of the layers' predicted times and energies under ``choice``."""
    table = _Costs(layers, partition, watts, _links(partition.devices, links), groups)
    return table.total([choice[layer.name] for layer in layers])


def fine_grained(
    layers: Sequence[LayerCost],
    partition: Partition,
    watts: Mapping[str, float],
    links: Mapping[str, LinkCost] | None = None,
    groups: Mapping[str, str] | None = None,
) -> FineResult:
    """Per-layer device choice (see the module docstring) for ``partition``'s devices and shares;
    ``groups`` names devices that share hardware (see :func:`option_cost`)."""
    table = _Costs(layers, partition, watts, _links(partition.devices, links), groups)
    options = subsets(partition.devices)
    allowed = [[o for o in options if layer.units or len(o) == 1] for layer in layers]
    coarse_map = coarse_choice(layers, partition)
    coarse = [coarse_map[layer.name] for layer in layers]
    starts = {o: [_layer_option(layer, o, partition) for layer in layers] for o in options}
    uniform = {o: table.total(start) for o, start in starts.items()}
    found = [_descend(table, coarse, allowed)] + [
        _descend(table, start, allowed) for start in starts.values()
    ]
    choice, best = min(found, key=lambda item: item[1].edp)  # ties keep the earlier: the coarse start
    names = [layer.name for layer in layers]
    overrides = {n: o for n, o, c in zip(names, choice, coarse, strict=True) if o != c}
    zero = {d: LinkCost(d) for d in partition.devices}
    return FineResult(
        partition=Partition(partition.shares, overrides),
        choice=dict(zip(names, choice, strict=True)),
        coarse=table.total(coarse),
        fine=best,
        coarse_without_transfer=_Costs(layers, partition, watts, zero, groups).total(coarse),
        changed=tuple(overrides),
        uniform=uniform,
    )


def _descend(
    table: _Costs, start: Sequence[Option], allowed: Sequence[Sequence[Option]], sweeps: int = MAX_SWEEPS
) -> tuple[list[Option], Estimate]:
    """Coordinate descent on the total EDP from ``start``: each layer takes its best option given the others."""
    choice = list(start)
    total = table.total(choice)
    seconds, joules = total.seconds, total.joules
    for _ in range(sweeps):
        improved = False
        for i in range(len(choice)):
            here = table.around(choice, i, choice[i])
            base_t, base_e = seconds - here.seconds, joules - here.joules
            best, best_edp, best_cost = choice[i], seconds * joules, here
            for option in allowed[i]:
                cost = table.around(choice, i, option)
                edp = (base_t + cost.seconds) * (base_e + cost.joules)
                if edp < best_edp * (1 - 1e-9):
                    best, best_edp, best_cost = option, edp, cost
            if best != choice[i]:
                choice[i] = best
                seconds, joules = base_t + best_cost.seconds, base_e + best_cost.joules
                improved = True
        if not improved:
            break
    return choice, table.total(choice)
