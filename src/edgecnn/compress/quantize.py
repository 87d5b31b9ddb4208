"""Weight quantisation as a storage plan: the graph keeps float32 weights, the .ecnn file stores them
as float16 or as int8 with one float32 scale per output channel, and load decodes them back to float32.

Only weights are quantised; activations stay float32 and every kernel still computes in float32,
so the gain is file size (and load bandwidth), not arithmetic speed. For int8 arithmetic (int32
accumulation, calibrated activation ranges) see edgecnn.compress.int8.
"""

from __future__ import annotations

from edgecnn.compress.layers import weight_layers
from edgecnn.errors import InputError
from edgecnn.ir.graph import Graph

MODES = {"fp16": "float16", "float16": "float16", "int8": "int8"}


def storage_mode(mode: str) -> str:
    """'fp16' | 'float16' | 'int8' -> the storage name; InputError otherwise."""
    if mode not in MODES:
        raise InputError(f"unknown quantisation '{mode}': use int8 or fp16")
    return MODES[mode]


def quantize(graph: Graph, mode: str) -> dict[str, str]:
    """Storage plan for ``save_ecnn``: every weight tensor as ``float16``, or as symmetric ``int8``
    with a scale per index of its output-channel axis (axis 0 of a Conv or transposed-B Gemm weight)."""
    storage = storage_mode(mode)
    plan = {}
    for layer in weight_layers(graph):
        if storage == "int8" and layer.out_axis:
            plan[layer.tensor] = f"int8:axis={layer.out_axis}"
        else:
            plan[layer.tensor] = storage
    return plan
