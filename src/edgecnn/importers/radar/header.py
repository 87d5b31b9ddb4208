"""The integer control header of seed 003's model file: parsing, packing and every check on it.

Layout (little-endian int32 words, see docs/formats/radar.md): word 0 is the layer count L, then
7 words per layer: weight dims (3), pooling dims (3), bias dim (1). Float32 data follows. This
module never touches the float data; it decides from the header alone how many bytes the file
must have, so nothing is allocated or read on the word of a damaged header.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.errors import ModelFormatError

WORD = np.dtype("<i4")
FLOAT = np.dtype("<f4")
WORD_SIZE = 4
WORDS_PER_LAYER = 7
MAX_LAYERS = 1024
"""More layers than any network of this family has; bounds the header read when sniffing."""
MAX_DIM = 1 << 24
"""Largest channel count, feature count, kernel length, pooling window or stride accepted."""
MAX_INPUT_LENGTH = 1 << 24
PATENT_INPUT_LENGTH = 150
"""Seed 003's networks read 150-long vectors; the loader's default when the header allows it."""
NO_POOLING = (1, 1, 1)
"""The patent's pooling words for a layer without pooling."""


class LayerKind(enum.Enum):
    CONV = "convolution"
    DENSE = "fully connected"


class PoolKind(enum.IntEnum):
    """Pooling word 0."""

    AVERAGE = 1
    MAX = 2


@dataclass(frozen=True)
class RadarLayer:
    """One layer's seven header words; ``weight_dims[0] == 0`` marks a fully connected layer."""

    weight_dims: tuple[int, int, int]
    pool_dims: tuple[int, int, int] = NO_POOLING
    bias_dim: int = 0

    @property
    def kind(self) -> LayerKind:
        return LayerKind.DENSE if self.weight_dims[0] == 0 else LayerKind.CONV

    @property
    def in_size(self) -> int:
        """Input channels of a convolution, input features of a fully connected layer."""
        return self.weight_dims[1]

    @property
    def out_size(self) -> int:
        """Kernels (output channels) of a convolution, output features of a fully connected layer."""
        kernels, _, cols = self.weight_dims
        return cols if self.kind is LayerKind.DENSE else kernels

    @property
    def kernel(self) -> int:
        return self.weight_dims[2]

    @property
    def weight_shape(self) -> tuple[int, ...]:
        """Shape of the stored weight array, row-major: (out, in, kernel) or (in, out)."""
        return self.weight_dims[1:] if self.kind is LayerKind.DENSE else self.weight_dims

    @property
    def pool_kind(self) -> PoolKind:
        return PoolKind(self.pool_dims[0])

    @property
    def pool_window(self) -> int:
        return self.pool_dims[1]

    @property
    def pool_stride(self) -> int:
        return self.pool_dims[2]

    @property
    def pooled(self) -> bool:
        """A window of 1 with stride 1 is the identity: no pooling node."""
        return (self.pool_window, self.pool_stride) != (1, 1)

    @property
    def param_count(self) -> int:
        return math.prod(self.weight_shape) + self.bias_dim

    def words(self) -> tuple[int, ...]:
        return (*self.weight_dims, *self.pool_dims, self.bias_dim)

    def describe(self, index: int) -> str:
        return f"layer {index} ({self.kind.value})"

    def output_length(self, length: int) -> int | None:
        """Length after this convolution (valid, stride 1) and its pooling (no padding, floor);
        None when the input is shorter than the kernel or the window."""
        length -= self.kernel - 1
        if length < 1:
            return None
        if self.pooled:
            if length < self.pool_window:
                return None
            length = (length - self.pool_window) // self.pool_stride + 1
        return length


def header_size(layer_count: int) -> int:
    return WORD_SIZE * (1 + WORDS_PER_LAYER * layer_count)


def word_offset(layer: int, word: int) -> int:
    """Byte offset of word ``word`` (0..6) of layer ``layer``."""
    return WORD_SIZE * (1 + WORDS_PER_LAYER * layer + word)


def data_size(layers: Sequence[RadarLayer]) -> int:
    return FLOAT.itemsize * sum(layer.param_count for layer in layers)


def file_size(layers: Sequence[RadarLayer]) -> int:
    return header_size(len(layers)) + data_size(layers)


def pack_header(layers: Sequence[RadarLayer]) -> bytes:
    words = [len(layers)] + [w for layer in layers for w in layer.words()]
    return np.asarray(words, WORD).tobytes()


def parse_header(data: bytes | memoryview, source: str = "<radar>") -> list[RadarLayer]:
    """Read and check the header at the start of ``data`` (which may hold just the header)."""
    if len(data) < WORD_SIZE:
        raise ModelFormatError(f"{source}: {len(data)} bytes is too short for the layer count word at byte 0")
    count = int(np.frombuffer(data, WORD, 1, 0)[0])
    if not 1 <= count <= MAX_LAYERS:
        raise ModelFormatError(f"{source}: layer count {count} at byte 0 is out of range (1 to {MAX_LAYERS})")
    if header_size(count) > len(data):
        raise ModelFormatError(
            f"{source}: truncated header: {count} layers need {header_size(count)} header bytes, "
            f"the file has {len(data)}"
        )
    words = np.frombuffer(data, WORD, WORDS_PER_LAYER * count, WORD_SIZE).tolist()
    layers = []
    for i in range(count):
        w = words[WORDS_PER_LAYER * i : WORDS_PER_LAYER * (i + 1)]
        _check_ranges(w, i, source)
        layer = RadarLayer((w[0], w[1], w[2]), (w[3], w[4], w[5]), w[6])
        _check_layer(layer, i, source)
        layers.append(layer)
    check_chain(layers, source)
    return layers


_WORD_NAMES = (
    "kernel count",
    "weight rows",
    "weight columns",
    "pooling type",
    "pooling window",
    "pooling stride",
    "bias count",
)


def _check_ranges(words: list[int], index: int, source: str) -> None:
    for j, value in enumerate(words):
        if j == 3:
            continue  # the pooling type has its own check, with the kind of layer
        low = 0 if j == 0 else 1
        if not low <= value <= MAX_DIM:
            raise ModelFormatError(
                f"{source}: layer {index}: {_WORD_NAMES[j]} {value} at byte {word_offset(index, j)} "
                f"is out of range ({low} to {MAX_DIM})"
            )


def _check_layer(layer: RadarLayer, index: int, source: str) -> None:
    where = f"{source}: {layer.describe(index)}"
    if layer.kind is LayerKind.DENSE:
        if layer.pool_dims != NO_POOLING:
            raise ModelFormatError(
                f"{where}: pooling words {list(layer.pool_dims)} at byte {word_offset(index, 3)} must be "
                f"{list(NO_POOLING)} (fully connected layers do not pool)"
            )
    elif layer.pool_dims[0] not in {kind.value for kind in PoolKind}:
        raise ModelFormatError(
            f"{where}: pooling type {layer.pool_dims[0]} at byte {word_offset(index, 3)} is not "
            f"1 (average) or 2 (max)"
        )
    if layer.bias_dim != layer.out_size:
        raise ModelFormatError(
            f"{where}: bias count {layer.bias_dim} at byte {word_offset(index, 6)} differs from the "
            f"layer's {layer.out_size} outputs"
        )


def check_chain(layers: Sequence[RadarLayer], source: str = "<radar>") -> None:
    """Convolutions first, then fully connected layers, each reading what the previous one makes."""
    for i in range(1, len(layers)):
        prev, layer = layers[i - 1], layers[i]
        where = f"{source}: {layer.describe(i)}"
        at = word_offset(i, 1)
        if layer.kind is LayerKind.CONV and prev.kind is LayerKind.DENSE:
            raise ModelFormatError(f"{where} at byte {word_offset(i, 0)} follows a fully connected layer")
        if layer.kind is prev.kind and layer.in_size != prev.out_size:
            raise ModelFormatError(
                f"{where}: {layer.in_size} inputs at byte {at} but layer {i - 1} has {prev.out_size} outputs"
            )
        if layer.kind is LayerKind.DENSE and prev.kind is LayerKind.CONV and layer.in_size % prev.out_size:
            raise ModelFormatError(
                f"{where}: {layer.in_size} inputs at byte {at} is not a multiple of layer {i - 1}'s "
                f"{prev.out_size} channels"
            )
    if layers[-1].kind is not LayerKind.DENSE:
        raise ModelFormatError(
            f"{source}: the last layer (layer {len(layers) - 1}) must be fully connected (it feeds the softmax)"
        )


def conv_output_length(layers: Sequence[RadarLayer], length: int) -> int | None:
    """Length after the leading convolutions, or None if some kernel or window does not fit."""
    for layer in layers:
        if layer.kind is not LayerKind.CONV:
            break
        result = layer.output_length(length)
        if result is None:
            return None
        length = result
    return length


def input_channels(layers: Sequence[RadarLayer]) -> int:
    first = layers[0]
    return first.in_size if first.kind is LayerKind.CONV else 1


def input_lengths(layers: Sequence[RadarLayer], source: str = "<radar>") -> range:
    """Every input length for which the convolutions deliver exactly the first fully connected
    layer's inputs (lengths are monotone in the input length, so this is one range)."""
    dense_at = next(i for i, layer in enumerate(layers) if layer.kind is LayerKind.DENSE)
    dense = layers[dense_at]
    if dense_at == 0:
        return range(dense.in_size, dense.in_size + 1)
    target = dense.in_size // layers[dense_at - 1].out_size
    start = _first_length_reaching(layers, target)
    stop = _first_length_reaching(layers, target + 1)
    if start is None or start == stop:
        raise ModelFormatError(
            f"{source}: {dense.describe(dense_at)}: no input length up to {MAX_INPUT_LENGTH} makes the "
            f"convolutions deliver {dense.in_size} values ({layers[dense_at - 1].out_size} channels x {target})"
        )
    return range(start, MAX_INPUT_LENGTH + 1 if stop is None else stop)


def _first_length_reaching(layers: Sequence[RadarLayer], target: int) -> int | None:
    """Smallest input length whose convolution output is at least ``target`` long (binary search)."""

    def reaches(length: int) -> bool:
        out = conv_output_length(layers, length)
        return out is not None and out >= target

    if not reaches(MAX_INPUT_LENGTH):
        return None
    low, high = 1, MAX_INPUT_LENGTH
    while low < high:
        middle = (low + high) // 2
        if reaches(middle):
            high = middle
        else:
            low = middle + 1
    return low


def default_input_length(lengths: range) -> int:
    return PATENT_INPUT_LENGTH if PATENT_INPUT_LENGTH in lengths else lengths.start
