"""Seed-003 radar .bin: the patent's model and small generated ones. The header is edited word by
word (layer count, a layer's seven words) with the data resized to what the new header implies most
of the time, so the edit reaches the reader's checks of shapes and not only its size check."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import mutate
import numpy as np

Case = dict[str, bytes]
NAME = "radar"
REPO = Path(__file__).resolve().parents[2]
PATENT = REPO / "tests/importers/radar/data/patent_aircraft.bin"
WORDS = 7


def _pack(layers: list[tuple[int, ...]], rng: np.random.Generator) -> bytes:
    header = struct.pack(f"<{1 + WORDS * len(layers)}i", len(layers), *(w for layer in layers for w in layer))
    return header + rng.standard_normal(_data_count(layers)).astype("<f4").tobytes()


def _data_count(layers: list[tuple[int, ...]]) -> int:
    """Float32 values the header implies: each layer's weights and biases."""
    total = 0
    for kernels, rows, columns, *_, biases in layers:
        total += (kernels * rows * columns if kernels else rows * columns) + biases
    return max(total, 0)


def seeds() -> list[Case]:
    rng = np.random.default_rng(3)
    small = [
        (4, 1, 5, 2, 2, 2, 4),
        (6, 4, 3, 1, 1, 1, 6),
        (0, 6 * 32, 10, 1, 1, 1, 10),
        (0, 10, 3, 1, 1, 1, 3),
    ]
    flat = [(0, 150, 8, 1, 1, 1, 8), (0, 8, 2, 1, 1, 1, 2)]
    return [
        {"model.bin": PATENT.read_bytes()},
        {"model.bin": _pack(small, rng)},
        {"model.bin": _pack(flat, rng)},
    ]


def _layers(blob: bytes) -> list[tuple[int, ...]] | None:
    if len(blob) < 4:
        return None
    (count,) = struct.unpack_from("<i", blob)
    if not 1 <= count <= 64 or len(blob) < 4 * (1 + WORDS * count):
        return None
    words = struct.unpack_from(f"<{WORDS * count}i", blob, 4)
    return [tuple(words[i * WORDS : (i + 1) * WORDS]) for i in range(count)]


def mutate_case(case: Case, rng: random.Random) -> Case:
    blob = case["model.bin"]
    layers = _layers(blob)
    if layers is None or rng.random() < 0.2:
        return {"model.bin": mutate.mutate_bytes(blob, rng)}
    action = rng.random()
    if action < 0.7:
        index = rng.randrange(len(layers))
        words = list(layers[index])
        word = rng.randrange(WORDS)
        small = rng.random() < 0.5
        words[word] = (
            rng.randint(-1, 12) if small else mutate.clamp(mutate.interesting_int(rng), 32, signed=True)
        )
        layers[index] = tuple(words)
    elif action < 0.85:
        index = rng.randrange(len(layers))
        if rng.random() < 0.5 and len(layers) > 1:
            del layers[index]
        else:
            layers.insert(index, layers[index])
    header = struct.pack(f"<{1 + WORDS * len(layers)}i", len(layers), *(w for layer in layers for w in layer))
    count = _data_count(layers)
    if rng.random() < 0.8 and count < (16 << 20):
        data = np.random.default_rng(rng.randrange(1 << 30)).standard_normal(count).astype("<f4").tobytes()
    else:
        data = blob[4 * (1 + WORDS * len(layers)) :]
    if rng.random() < 0.1:
        header = struct.pack("<i", mutate.clamp(mutate.interesting_int(rng), 32, signed=True)) + header[4:]
    return {"model.bin": header + data}
