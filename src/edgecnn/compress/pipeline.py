"""``compress``: prune, quantise, and store sparse weights as CSR where that is smaller."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from edgecnn.compress.layers import density, weight_layers
from edgecnn.compress.prune import prune as prune_graph
from edgecnn.compress.quantize import quantize as quantize_plan
from edgecnn.compress.quantize import storage_mode
from edgecnn.errors import InputError
from edgecnn.format import stored_nbytes
from edgecnn.ir.graph import Graph

CSR_FOR = {None: "csr", "float16": "csr:float16", "int8": "csr:int8"}


def compress(
    graph: Graph,
    *,
    prune: float | None = None,
    prune_layers: Mapping[str, float] | None = None,
    quantize: str | None = None,
    sparse_threshold: float = 0.5,
) -> tuple[Graph, dict[str, str]]:
    """(pruned graph, storage plan) for ``save_ecnn(graph, path, storage=plan)``.

    ``prune``/``prune_layers`` as in ``prune``; ``quantize`` is None, "fp16" or "int8". A weight
    tensor whose density is below ``sparse_threshold`` is stored as CSR (with values in the
    quantised type) when that blob is smaller than the dense one; e.g. int8 CSR pays 4 bytes of
    column index per 1-byte value, so it only wins below about 20% density. A quantised storage
    that would not be smaller than raw (a tiny tensor, where the scales dominate) is dropped.
    """
    if not 0.0 <= sparse_threshold <= 1.0:
        raise InputError(f"sparse_threshold must be in 0..1, got {sparse_threshold}")
    storage = storage_mode(quantize) if quantize is not None else None
    pruned = prune_graph(graph, prune, prune_layers) if prune is not None or prune_layers else graph
    plan = quantize_plan(pruned, quantize) if quantize is not None else {}
    for layer in weight_layers(pruned):
        weights = np.asarray(pruned.initializers[layer.tensor])
        dense_choice = plan.get(layer.tensor, "raw")
        if stored_nbytes(weights, dense_choice) >= weights.nbytes:  # scales outweigh a tiny tensor
            plan.pop(layer.tensor, None)
            dense_choice = "raw"
        if density(weights) >= sparse_threshold or weights.ndim == 0:
            continue
        sparse_choice = CSR_FOR[storage]
        if stored_nbytes(weights, sparse_choice) < stored_nbytes(weights, dense_choice):
            plan[layer.tensor] = sparse_choice
    return pruned, plan
