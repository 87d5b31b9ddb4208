"""Seed 003's binary model file (the radar CNN patent): an int32 control header, then float32
weights and biases layer by layer. The precise reading of the patent is docs/formats/radar.md.

``load_radar(path)`` builds the graph; ``save_radar(graph_or_model, path)`` writes any graph of
the format's family (1-D conv + pooling blocks, fully connected layers, softmax);
``looks_like_radar(path)`` is the cheap content check the format dispatcher uses, since the
format has no magic number.
"""

from __future__ import annotations

from edgecnn.importers.radar.header import (
    MAX_DIM,
    MAX_INPUT_LENGTH,
    MAX_LAYERS,
    NO_POOLING,
    PATENT_INPUT_LENGTH,
    LayerKind,
    PoolKind,
    RadarLayer,
    file_size,
    input_lengths,
    pack_header,
    parse_header,
)
from edgecnn.importers.radar.reader import (
    INPUT_NAME,
    OUTPUT_NAME,
    LayerParams,
    build_graph,
    load_radar,
    looks_like_radar,
    read_radar,
)
from edgecnn.importers.radar.writer import radar_layers, save_radar

__all__ = [
    "INPUT_NAME",
    "MAX_DIM",
    "MAX_INPUT_LENGTH",
    "MAX_LAYERS",
    "NO_POOLING",
    "OUTPUT_NAME",
    "PATENT_INPUT_LENGTH",
    "LayerKind",
    "LayerParams",
    "PoolKind",
    "RadarLayer",
    "build_graph",
    "file_size",
    "input_lengths",
    "load_radar",
    "looks_like_radar",
    "pack_header",
    "parse_header",
    "radar_layers",
    "read_radar",
    "save_radar",
]
