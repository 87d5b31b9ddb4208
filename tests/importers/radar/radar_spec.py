"""Shared pieces of the seed-003 format tests, written from docs/formats/radar.md without edgecnn:
a network description, a file writer (struct only) and a numpy forward pass (loops, np.convolve).

The bundled fixture data/patent_aircraft.bin is ``write_radar_file(patent_network(PATENT_SEED))``;
regenerate it with ``.venv/bin/python tests/importers/radar/radar_spec.py``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data"
PATENT_FILE = DATA / "patent_aircraft.bin"
PATENT_SEED = 3
PATENT_LENGTH = 150


@dataclass
class Layer:
    """kind "conv": weights (kernels, channels, length), pool (type, window, stride);
    kind "dense": weights (inputs, outputs)."""

    kind: str
    weights: np.ndarray
    bias: np.ndarray
    pool: tuple[int, int, int] = (1, 1, 1)

    def words(self) -> tuple[int, ...]:
        if self.kind == "conv":
            kernels, channels, length = self.weights.shape
            return (kernels, channels, length, *self.pool, kernels)
        inputs, outputs = self.weights.shape
        return (0, inputs, outputs, 1, 1, 1, outputs)


def he_layer(rng: np.random.Generator, kind: str, shape: tuple[int, ...], pool=(1, 1, 1)) -> Layer:
    fan_in = int(np.prod(shape[1:])) if kind == "conv" else shape[0]
    weights = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    bias = (rng.standard_normal(shape[0] if kind == "conv" else shape[1]) * 0.1).astype(np.float32)
    return Layer(kind, weights, bias, pool)


def patent_network(seed: int = PATENT_SEED) -> list[Layer]:
    """Seed 003's aircraft classifier: 150 -> conv 6x[1 5] -> avg pool -> conv 12x[6 5] -> avg pool
    -> FC 384->50 -> FC 50->10 -> softmax. Pool window 5, stride 2 (the window that gives 384)."""
    rng = np.random.default_rng(seed)
    return [
        he_layer(rng, "conv", (6, 1, 5), (1, 5, 2)),
        he_layer(rng, "conv", (12, 6, 5), (1, 5, 2)),
        he_layer(rng, "dense", (384, 50)),
        he_layer(rng, "dense", (50, 10)),
    ]


def radar_bytes(layers: list[Layer]) -> bytes:
    words = [len(layers)] + [w for layer in layers for w in layer.words()]
    out = [struct.pack(f"<{len(words)}i", *words)]
    for layer in layers:
        for array in (layer.weights, layer.bias):
            flat = [float(v) for v in array.reshape(-1)]
            out.append(struct.pack(f"<{len(flat)}f", *flat))
    return b"".join(out)


def write_radar_file(path: Path, layers: list[Layer]) -> Path:
    path.write_bytes(radar_bytes(layers))
    return path


def _conv1d(x: np.ndarray, weights: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """x (C, L) -> (M, L - k + 1); cross-correlation, so np.convolve gets the flipped kernel."""
    kernels, channels, _ = weights.shape
    rows = []
    for m in range(kernels):
        acc = sum(np.convolve(x[c], weights[m, c, ::-1], mode="valid") for c in range(channels))
        rows.append(acc + bias[m])
    return np.stack(rows)


def _pool1d(x: np.ndarray, kind: int, window: int, stride: int) -> np.ndarray:
    count = (x.shape[1] - window) // stride + 1
    reduce = np.mean if kind == 1 else np.max
    out = np.empty((x.shape[0], count))
    for c in range(x.shape[0]):
        for i in range(count):
            out[c, i] = reduce(x[c, i * stride : i * stride + window])
    return out


def reference_forward(layers: list[Layer], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(logits, probabilities) in float64 for a batch x (N, C, L), one sample at a time."""
    logits = []
    for sample in np.asarray(x, np.float64):
        h = sample
        for i, layer in enumerate(layers):
            w, b = layer.weights.astype(np.float64), layer.bias.astype(np.float64)
            if layer.kind == "conv":
                h = _conv1d(h, w, b)
                if layer.pool[1:] != (1, 1):
                    h = _pool1d(h, *layer.pool)
                h = np.maximum(h, 0)
            else:
                h = h.reshape(-1) @ w + b
                if i < len(layers) - 1:
                    h = np.maximum(h, 0)
        logits.append(h)
    z = np.stack(logits)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return z, e / e.sum(axis=1, keepdims=True)


if __name__ == "__main__":
    DATA.mkdir(exist_ok=True)
    write_radar_file(PATENT_FILE, patent_network())
    print(f"wrote {PATENT_FILE} ({PATENT_FILE.stat().st_size} bytes)")
