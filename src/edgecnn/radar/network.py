"""Seed 003's network, untrained: 150 samples -> conv 6x1x5 + average pool -> conv 12x6x5 + average
pool -> FC 384->50 -> FC 50->10 -> softmax, built by the seed-003 format's own graph builder so that
what is trained is exactly what the format stores (docs/formats/radar.md: pooling window 5, stride 2,
the reading that gives the patent's 384 features)."""

from __future__ import annotations

import numpy as np

from edgecnn.importers.radar import PATENT_INPUT_LENGTH, LayerParams, PoolKind, RadarLayer, build_graph
from edgecnn.ir.graph import Graph

PATENT_LAYERS: tuple[RadarLayer, ...] = (
    RadarLayer((6, 1, 5), (PoolKind.AVERAGE, 5, 2), 6),
    RadarLayer((12, 6, 5), (PoolKind.AVERAGE, 5, 2), 12),
    RadarLayer((0, 384, 50), (1, 1, 1), 50),
    RadarLayer((0, 50, 10), (1, 1, 1), 10),
)
"""The patent's four layers (embodiment 2) as the format's header words."""


def untrained_network(
    seed: int = 0, layers: tuple[RadarLayer, ...] = PATENT_LAYERS, name: str = "radar-hrrp"
) -> Graph:
    """The network with He-initialised weights (drawn from ``seed``) and zero biases."""
    rng = np.random.default_rng(seed)
    params = []
    for layer in layers:
        fan_in = int(np.prod(layer.weight_shape[1:])) if layer.weight_dims[0] else layer.in_size
        weights = rng.standard_normal(layer.weight_shape) * np.sqrt(2.0 / fan_in)
        params.append(LayerParams(weights.astype(np.float32), np.zeros(layer.bias_dim, np.float32)))
    return build_graph(list(layers), params, PATENT_INPUT_LENGTH, name)
