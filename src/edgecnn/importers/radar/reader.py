"""Seed 003 model file -> Graph: check the header against the file size, then slice the floats."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgecnn.errors import InputError, ModelFormatError
from edgecnn.importers.radar.header import (
    FLOAT,
    MAX_LAYERS,
    WORD_SIZE,
    LayerKind,
    PoolKind,
    RadarLayer,
    default_input_length,
    file_size,
    header_size,
    input_channels,
    input_lengths,
    parse_header,
)
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.limits import MemoryBudget, read_file_bounded
from edgecnn.ops.activation import SoftmaxAttrs
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import FlattenAttrs

INPUT_NAME = "input"
OUTPUT_NAME = "probabilities"
LENGTHS_METADATA = "radar.input_lengths"


@dataclass(frozen=True)
class LayerParams:
    weights: np.ndarray
    bias: np.ndarray


def looks_like_radar(path: str | os.PathLike[str]) -> bool:
    """Cheap sniff (reads at most the header): the header parses and predicts the file's size."""
    try:
        size = os.stat(path).st_size
        if size < header_size(1) or size % WORD_SIZE:
            return False
        with open(path, "rb") as f:
            head = f.read(min(size, header_size(MAX_LAYERS)))
        return file_size(parse_header(head, str(path))) == size
    except (OSError, ModelFormatError):
        return False


def load_radar(
    path: str | os.PathLike[str], *, input_length: int | None = None, budget: MemoryBudget | None = None
) -> Graph:
    """Read a seed-003 ``.bin`` model. The file does not store the input length: ``input_length``
    picks one; by default the patent's 150 when the header allows it, else the shortest allowed.
    Only a regular file within ``budget`` (default: MemoryBudget.default()) is read."""
    path = Path(path)
    data = read_file_bounded(path, budget or MemoryBudget.default())
    return read_radar(data, str(path), input_length=input_length, name=path.stem)


def read_radar(
    data: bytes, source: str = "<radar>", *, input_length: int | None = None, name: str = "radar"
) -> Graph:
    layers = parse_header(data, source)
    _check_size(layers, len(data), source)
    lengths = input_lengths(layers, source)
    if input_length is None:
        input_length = default_input_length(lengths)
    elif input_length not in lengths:
        raise InputError(
            f"{source}: input length {input_length} does not fit the network; it accepts "
            f"{lengths.start} to {lengths.stop - 1}"
        )
    graph = build_graph(layers, _read_params(layers, data), input_length, name)
    graph.metadata[LENGTHS_METADATA] = f"{lengths.start}-{lengths.stop - 1}"
    return graph


def _check_size(layers: list[RadarLayer], size: int, source: str) -> None:
    """Name the first array that runs past the end, or the bytes left over after the last."""
    offset = header_size(len(layers))
    for i, layer in enumerate(layers):
        for what, shape in (("weights", layer.weight_shape), ("biases", (layer.bias_dim,))):
            need = FLOAT.itemsize * math.prod(shape)
            if offset + need > size:
                raise ModelFormatError(
                    f"{source}: truncated: {layer.describe(i)} {what} {list(shape)} at byte {offset} need "
                    f"{need} bytes, the file ends at byte {size}"
                )
            offset += need
    if offset != size:
        raise ModelFormatError(
            f"{source}: {size - offset} unexpected bytes after the last layer's data (it ends at byte "
            f"{offset}, the file at byte {size})"
        )


def _read_params(layers: list[RadarLayer], data: bytes) -> list[LayerParams]:
    offset = header_size(len(layers))
    params = []
    for layer in layers:
        arrays = []
        for shape in (layer.weight_shape, (layer.bias_dim,)):
            count = math.prod(shape)
            arrays.append(np.frombuffer(data, FLOAT, count, offset).astype(np.float32).reshape(shape))
            offset += FLOAT.itemsize * count
        params.append(LayerParams(*arrays))
    return params


def build_graph(layers: list[RadarLayer], params: list[LayerParams], input_length: int, name: str) -> Graph:
    """The network the header describes: per convolution Conv -> [pool] -> Relu, then Flatten,
    per fully connected layer Gemm -> Relu, the last one Gemm -> Softmax."""
    graph = Graph(
        [TensorSpec(INPUT_NAME, "float32", ("N", input_channels(layers), input_length))], [], [], name=name
    )
    x = INPUT_NAME

    def add(op: str, node_name: str, inputs: list[str], attrs: object, output: str | None = None) -> str:
        out = output or node_name
        graph.nodes.append(Node(op, node_name, inputs, [out], attrs))
        return out

    for i, (layer, p) in enumerate(zip(layers, params)):
        prefix = f"layer{i}"
        weights, bias = f"{prefix}.weight", f"{prefix}.bias"
        graph.initializers[weights], graph.initializers[bias] = p.weights, p.bias
        last = i == len(layers) - 1
        if layer.kind is LayerKind.CONV:
            conv = ConvAttrs(kernel_shape=(layer.kernel,), strides=(1,), pads=(0, 0), dilations=(1,))
            x = add("Conv", f"{prefix}.conv", [x, weights, bias], conv)
            if layer.pooled:
                window, stride = (layer.pool_window,), (layer.pool_stride,)
                if layer.pool_kind is PoolKind.AVERAGE:
                    x = add("AveragePool", f"{prefix}.pool", [x], AveragePoolAttrs(window, stride, (0, 0)))
                else:
                    x = add("MaxPool", f"{prefix}.pool", [x], MaxPoolAttrs(window, stride, (0, 0)))
            x = add("Relu", f"{prefix}.relu", [x], NoAttrs())
            continue
        if i == 0 or layers[i - 1].kind is LayerKind.CONV:
            x = add("Flatten", "flatten", [x], FlattenAttrs(axis=1))
        x = add("Gemm", f"{prefix}.fc", [x, weights, bias], GemmAttrs())
        if last:
            x = add("Softmax", "softmax", [x], SoftmaxAttrs(axis=-1), OUTPUT_NAME)
        else:
            x = add("Relu", f"{prefix}.relu", [x], NoAttrs())
    graph.outputs = [x]
    return graph
