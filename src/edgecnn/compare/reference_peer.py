"""edgecnn's own numpy reference kernels as the other engine, on the graph as imported.

Against it, a difference comes from the compiled kernels or from the graph passes (fusion, folding),
the two things the reference path leaves out. Its noise is the same reference run fed the input
nudged by one ulp."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from edgecnn.compare.peer import Peer, Probe
from edgecnn.importers import LOADERS, load_graph
from edgecnn.ir.graph import Graph
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions


class ReferencePeer(Peer):
    name = "reference"
    package = "numpy"
    formats = tuple(LOADERS)
    noise_source = "edgecnn's reference kernels fed the input nudged by one ulp"

    def __init__(self, model: Path, weights: Path | None, threads: int) -> None:
        super().__init__(model, weights, threads)
        options = RuntimeOptions.resolve(threads=threads, device="reference", optimize=False)
        self.net = Model(load_graph(model, weights), options)

    def probes(self, graph: Graph) -> list[Probe]:
        return [Probe(name, name, node.op) for node in self.net.graph.nodes for name in node.outputs if name]

    def run(self, feeds: Mapping[str, np.ndarray], keys: Sequence[str], alternate: bool) -> list[np.ndarray]:
        values = self.net.run(dict(feeds), outputs=list(keys))
        return [values[k] for k in keys]
