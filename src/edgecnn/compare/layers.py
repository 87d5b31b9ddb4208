"""``compare_layers``: run edgecnn and another engine on one input and compare every intermediate
tensor both can name, in edgecnn's graph order.

edgecnn runs its optimised graph by default, where fusion and folding have removed some tensors
(a convolution's output once its activation is fused into it): those are listed as hidden, and
``optimize=False`` runs the graph as imported so that every one is compared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.compare.metrics import TensorDiff, Tolerance, align, diff, max_abs_change
from edgecnn.compare.peer import Probe, nudged, open_peer
from edgecnn.errors import InputError
from edgecnn.importers import load_graph
from edgecnn.ir.graph import Graph, Node
from edgecnn.model import Model
from edgecnn.runtime.feeds import random_feeds
from edgecnn.runtime.options import RuntimeOptions


@dataclass(frozen=True)
class LayerComparison:
    """One tensor compared: where edgecnn computes it, what the peer calls it, how far apart they are."""

    tensor: str
    layer: str  # the node of edgecnn's graph (as run) that computes the tensor
    op: str
    peer_name: str
    peer_op: str
    shape: tuple[int, ...]
    peer_shape: tuple[int, ...]
    diff: TensorDiff | None  # None when the element counts differ

    @property
    def status(self) -> str:
        return "shape" if self.diff is None else self.diff.status


@dataclass(frozen=True)
class Comparison:
    """The result of one comparison, layer by layer."""

    model: str
    peer_model: str
    against: str
    optimized: bool
    inputs: Mapping[str, tuple[int, ...]]
    noise_source: str
    tolerance: Tolerance
    layers: tuple[LayerComparison, ...]
    hidden: tuple[str, ...]  # tensors both engines name that the optimised graph no longer has
    unmatched: int  # values the peer names that edgecnn's graph has no tensor for

    @property
    def first_over(self) -> LayerComparison | None:
        """The first layer, in edgecnn's order, whose difference is not within tolerance."""
        return next((layer for layer in self.layers if layer.status != "ok"), None)

    def to_json(self) -> dict[str, Any]:
        first = self.first_over
        return {
            "model": self.model,
            "peer_model": self.peer_model,
            "against": self.against,
            "optimized": self.optimized,
            "inputs": {name: list(shape) for name, shape in self.inputs.items()},
            "noise_source": self.noise_source,
            "tolerance": asdict(self.tolerance),
            "first_over": None
            if first is None
            else {"tensor": first.tensor, "layer": first.layer, "op": first.op},
            "layers": [
                {
                    "tensor": layer.tensor,
                    "layer": layer.layer,
                    "op": layer.op,
                    "peer_name": layer.peer_name,
                    "peer_op": layer.peer_op,
                    "shape": list(layer.shape),
                    "peer_shape": list(layer.peer_shape),
                    "status": layer.status,
                    **(asdict(layer.diff) if layer.diff is not None else {}),
                }
                for layer in self.layers
            ],
            "hidden": list(self.hidden),
            "unmatched": self.unmatched,
        }


def compare_layers(
    model: Path,
    against: str,
    *,
    weights: Path | None = None,
    peer_model: Path | None = None,
    peer_weights: Path | None = None,
    feeds: Mapping[str, np.ndarray] | np.ndarray | None = None,
    shape: Sequence[int] | None = None,
    optimize: bool = True,
    tolerance: Tolerance | None = None,
    threads: int | None = None,
    seed: int = 0,
    on_stage: Callable[[str], None] | None = None,
) -> Comparison:
    """Compare edgecnn on ``model`` with the engine ``against`` (peer.PEERS) on ``peer_model``
    (default: the same file, with ``peer_weights`` or else ``weights``).

    ``feeds`` default to seeded standard-normal inputs of the model's shape, or of ``shape`` for a
    one-input model. ``on_stage`` is called before each of the five stages (for progress)."""
    stage = on_stage or (lambda _: None)
    tolerance = tolerance or Tolerance()
    stage("loading the model")
    options = RuntimeOptions.resolve(threads=threads, optimize=optimize)
    net = Model(load_graph(model, weights), options)
    if feeds is not None:
        checked = net.check_feeds(feeds)
    else:
        if shape is not None and len(net.inputs) != 1:
            raise InputError(f"a shape is for one-input models; {model} has {len(net.inputs)}: give arrays")
        shapes = {net.inputs[0].name: shape} if shape is not None else None
        checked = random_feeds(net.inputs, shapes=shapes, seed=seed)
    stage(f"loading {against}")
    peer_path = peer_model or model
    peer = open_peer(
        against, peer_path, peer_weights if peer_model else peer_weights or weights, options.threads
    )
    named = peer.probes(net.graph)
    probes = matched(named, net.graph)
    unmatched = len({p.key for p in named}) - len(probes)
    producers = {out: node for node in net.optimized_graph.nodes for out in node.outputs if out}
    hidden = tuple(p.tensor for p in probes if p.tensor not in producers)  # fused away or folded
    probes = [p for p in probes if p.tensor in producers]
    stage("running edgecnn")
    ours = net.run(checked, outputs=[p.tensor for p in probes]) if probes else {}
    probes = [p for p in probes if np.issubdtype(ours[p.tensor].dtype, np.number)]
    keys = [p.key for p in probes]
    stage(f"running {against}")
    theirs = peer.run(checked, keys, alternate=False) if keys else []
    stage(f"measuring {against}'s own noise")
    moved = peer.run(nudged(checked, seed), keys, alternate=True) if keys else []
    rows = [
        layer_row(probe, producers[probe.tensor], ours[probe.tensor], value, other, tolerance)
        for probe, value, other in zip(probes, theirs, moved)
    ]
    return Comparison(
        model=str(model),
        peer_model=str(peer_path),
        against=against,
        optimized=optimize,
        inputs={name: tuple(a.shape) for name, a in checked.items()},
        noise_source=peer.noise_source,
        tolerance=tolerance,
        layers=tuple(rows),
        hidden=hidden,
        unmatched=unmatched,
    )


def layer_row(
    probe: Probe, node: Node, mine: np.ndarray, theirs: np.ndarray, moved: np.ndarray, tolerance: Tolerance
) -> LayerComparison:
    """One row: edgecnn's value against the peer's, whose two runs' difference is its noise."""
    aligned, aligned_moved = align(mine, theirs), align(mine, moved)
    result = None
    if aligned is not None and aligned_moved is not None:
        result = diff(mine, aligned, max_abs_change(aligned, aligned_moved), tolerance)
    return LayerComparison(
        probe.tensor,
        node.name,
        node.op,
        probe.key,
        probe.peer_op,
        tuple(mine.shape),
        tuple(theirs.shape),
        result,
    )


def matched(probes: Sequence[Probe], graph: Graph) -> list[Probe]:
    """The probes whose tensor some node of ``graph`` computes, one per tensor, in graph order."""
    order = {name: i for i, node in enumerate(graph.nodes) for name in node.outputs if name}
    chosen: dict[str, Probe] = {}
    for probe in probes:
        if probe.tensor in order:
            chosen.setdefault(probe.tensor, probe)
    return sorted(chosen.values(), key=lambda p: order[p.tensor])
