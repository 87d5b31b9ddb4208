"""The .weights format: header versions, Darknet's parameter order, and damaged files."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import edgecnn
from edgecnn.errors import ModelFormatError
from edgecnn.importers.darknet import (
    FileWeights,
    ParamKind,
    WeightsHeader,
    load_darknet,
    write_random_weights,
    write_weights,
)
from edgecnn.importers.darknet.layers import BN_EPSILON

NET = "[net]\nwidth=3\nheight=3\nchannels=1\n"
CONV_BN = "[convolutional]\nfilters=2\nsize=1\nbatch_normalize=1\nactivation=linear\n"
CONNECTED_BN = "[connected]\noutput=2\nbatch_normalize=1\nactivation=linear\n"


@pytest.mark.parametrize(
    ("version", "seen_bytes", "transposed"),
    [
        ((0, 1, 0), 4, False),
        ((0, 2, 0), 8, False),
        ((1, 0, 0), 8, False),
        ((1001, 0, 0), 4, True),
        ((0, 1001, 5), 4, True),
    ],
)
def test_header_versions(version: tuple[int, int, int], seen_bytes: int, transposed: bool) -> None:
    header = struct.pack("<3i", *version) + (
        struct.pack("<q", 123456789012) if seen_bytes == 8 else struct.pack("<i", 77)
    )
    source = FileWeights(header + struct.pack("<2f", 1.5, -2.0))
    assert source.header.size == 12 + seen_bytes
    assert source.header.seen == (123456789012 if seen_bytes == 8 else 77)
    assert source.header.transposed is transposed
    np.testing.assert_array_equal(source.take("0", ParamKind.BIASES, (2,)), [1.5, -2.0])
    source.finish()
    assert WeightsHeader(*version, source.header.seen).pack() == header


def test_writer_bytes_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "w.weights"
    write_weights(
        path, [np.array([1, 2], np.float64), np.array([[3.5]], np.float32)], WeightsHeader(0, 2, 1, 9)
    )
    assert path.read_bytes() == struct.pack("<3iq3f", 0, 2, 1, 9, 1, 2, 3.5)


def write_cfg(tmp_path: Path, text: str) -> Path:
    cfg = tmp_path / "net.cfg"
    cfg.write_text(text)
    return cfg


def test_darknet_order_for_conv_and_connected(tmp_path: Path) -> None:
    """conv: biases, scales, mean, variance, weights; connected: biases, weights, scales, mean, variance."""
    cfg = write_cfg(tmp_path, NET + CONV_BN + CONNECTED_BN)
    conv = [10, 11, 1.5, 2.5, 0.25, 0.5, 4.0, 9.0, 7, 8]  # 2 biases, 2 scales, 2 means, 2 variances, 2x1x1x1
    fc_weights = np.arange(36, dtype=np.float32).reshape(2, 18)
    connected = [20, 21, *fc_weights.ravel(), 3, 4, 0.75, 0.125, 16.0, 25.0]
    path = tmp_path / "net.weights"
    path.write_bytes(struct.pack("<3iq", 0, 2, 0, 0) + np.asarray(conv + connected, "<f4").tobytes())
    graph = load_darknet(cfg, path)
    init = graph.initializers
    np.testing.assert_array_equal(init["layer0.convolutional.W"].ravel(), [7, 8])
    np.testing.assert_array_equal(init["layer0.convolutional.bias"], [10, 11])
    np.testing.assert_array_equal(init["layer0.convolutional.scale"], [1.5, 2.5])
    np.testing.assert_array_equal(init["layer0.convolutional.mean"], [0.25, 0.5])
    np.testing.assert_array_equal(init["layer1.connected.W"], fc_weights)
    np.testing.assert_array_equal(init["layer1.connected.bias"], [20, 21])
    np.testing.assert_array_equal(init["layer1.connected.scale"], [3, 4])
    # Darknet divides by sqrt(var) + 1e-6; the stored variance makes ONNX-style BN agree.
    stored = init["layer1.connected.var"].astype(np.float64)
    np.testing.assert_allclose(np.sqrt(stored + BN_EPSILON), [4.000001, 5.000001], rtol=1e-7)


def test_transposed_connected_weights(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, NET + "[connected]\noutput=2\nactivation=linear\n")
    matrix = np.arange(18, dtype=np.float32).reshape(2, 9)
    plain, transposed = tmp_path / "plain.weights", tmp_path / "transposed.weights"
    write_weights(plain, [np.array([1, 2], np.float32), matrix])
    write_weights(transposed, [np.array([1, 2], np.float32), matrix.T], WeightsHeader(1002, 0, 0, 3))
    x = np.random.default_rng(0).random((1, 1, 3, 3), np.float32)
    expected = x.reshape(1, 9) @ matrix.T + [1, 2]
    for path in (plain, transposed):
        np.testing.assert_allclose(edgecnn.load(cfg, path)(x), expected, rtol=1e-6)


def test_too_short_names_layer_and_offset(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, NET + CONV_BN + CONNECTED_BN)
    path = tmp_path / "net.weights"
    write_random_weights(cfg, path)
    data = path.read_bytes()
    path.write_bytes(data[: 20 + 4 * 9])
    with pytest.raises(
        ModelFormatError,
        match=r"byte offset 52: layer 0 \[convolutional\] needs 2 weights values, only 1 remain",
    ):
        load_darknet(cfg, path)
    path.write_bytes(data[: 20 + 4 * 12])
    with pytest.raises(ModelFormatError, match=r"byte offset 68: layer 1 \[connected\] needs 36 weights"):
        load_darknet(cfg, path)


def test_too_long_is_an_error(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, NET + CONV_BN)
    path = tmp_path / "net.weights"
    write_random_weights(cfg, path)
    path.write_bytes(path.read_bytes() + b"\0" * 6)
    with pytest.raises(ModelFormatError, match="6 bytes left over at byte offset 60"):
        load_darknet(cfg, path)


def test_short_header_and_negative_variance(tmp_path: Path) -> None:
    with pytest.raises(ModelFormatError, match="too short for a Darknet weights header"):
        FileWeights(b"\0" * 10)
    with pytest.raises(ModelFormatError, match="too short for a Darknet weights header"):
        FileWeights(struct.pack("<3ii", 0, 2, 0, 0))  # claims an int64 'seen' but has 4 bytes
    cfg = write_cfg(tmp_path, NET + CONV_BN)
    path = tmp_path / "net.weights"
    write_weights(path, [np.zeros(6, np.float32), np.array([1, -1], np.float32), np.zeros(2, np.float32)])
    with pytest.raises(ModelFormatError, match="negative or NaN rolling variances"):
        load_darknet(cfg, path)


def test_missing_weights_is_an_error(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, NET + CONV_BN)
    with pytest.raises(ModelFormatError, match="has no weights; pass weights="):
        edgecnn.load(cfg)
    graph = load_darknet(cfg, None, random_seed=5)
    assert np.all(graph.initializers["layer0.convolutional.var"] > 0)


def test_random_weights_are_seeded(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, NET + CONV_BN + CONNECTED_BN)
    paths = [tmp_path / f"{i}.weights" for i in range(3)]
    for path, seed in zip(paths, (1, 1, 2)):
        write_random_weights(cfg, path, seed=seed)
    assert paths[0].read_bytes() == paths[1].read_bytes() != paths[2].read_bytes()
    assert len(paths[0].read_bytes()) == 20 + 4 * (10 + 2 + 36 + 6)
