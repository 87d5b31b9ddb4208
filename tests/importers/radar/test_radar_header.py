"""The header words of the patent network, the input-length rule and the format sniff."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from edgecnn.errors import InputError
from edgecnn.importers.radar import (
    LayerKind,
    RadarLayer,
    file_size,
    input_lengths,
    load_radar,
    looks_like_radar,
    pack_header,
    parse_header,
)
from importers.radar.radar_spec import PATENT_FILE, Layer, he_layer, radar_bytes

PATENT_WORDS = [
    4,
    *(6, 1, 5, 1, 5, 2, 6),
    *(12, 6, 5, 1, 5, 2, 12),
    *(0, 384, 50, 1, 1, 1, 50),
    *(0, 50, 10, 1, 1, 1, 10),
]


def test_patent_header_words(patent_bytes: bytes) -> None:
    assert list(struct.unpack_from("<29i", patent_bytes)) == PATENT_WORDS
    floats = 6 * 5 + 6 + 12 * 6 * 5 + 12 + 384 * 50 + 50 + 50 * 10 + 10
    assert len(patent_bytes) == 4 * 29 + 4 * floats


def test_parse_and_pack_are_inverse(patent_bytes: bytes) -> None:
    layers = parse_header(patent_bytes)
    assert [layer.kind for layer in layers] == [LayerKind.CONV] * 2 + [LayerKind.DENSE] * 2
    assert [layer.weight_shape for layer in layers] == [(6, 1, 5), (12, 6, 5), (384, 50), (50, 10)]
    assert pack_header(layers) == patent_bytes[: 4 * 29]
    assert file_size(layers) == len(patent_bytes)


def test_patent_input_lengths_and_default() -> None:
    layers = parse_header(PATENT_FILE.read_bytes())
    # 149..152 all reach 12 x 32 = 384 through conv 5 -> pool 5/2 -> conv 5 -> pool 5/2
    assert input_lengths(layers) == range(149, 153)
    graph = load_radar(PATENT_FILE)
    assert graph.inputs[0].shape == ("N", 1, 150)
    assert graph.metadata["radar.input_lengths"] == "149-152"
    assert load_radar(PATENT_FILE, input_length=152).inputs[0].shape == ("N", 1, 152)
    with pytest.raises(InputError, match="input length 153 does not fit the network; it accepts 149 to 152"):
        load_radar(PATENT_FILE, input_length=153)


def test_default_is_the_shortest_length_when_150_does_not_fit(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    layers = [he_layer(rng, "conv", (2, 1, 3), (1, 2, 2)), he_layer(rng, "dense", (2 * 10, 4))]
    path = tmp_path / "short.bin"
    path.write_bytes(radar_bytes(layers))
    assert input_lengths(parse_header(path.read_bytes())) == range(22, 24)  # 22 -> 20 -> 10, 23 -> 21 -> 10
    assert load_radar(path).inputs[0].shape == ("N", 1, 22)


def test_network_without_convolutions_reads_its_feature_count(tmp_path: Path) -> None:
    layers = [he_layer(np.random.default_rng(0), "dense", (7, 3))]
    path = tmp_path / "dense.bin"
    path.write_bytes(radar_bytes(layers))
    graph = load_radar(path)
    assert graph.inputs[0].shape == ("N", 1, 7)
    assert [n.op for n in graph.nodes] == ["Flatten", "Gemm", "Softmax"]


@pytest.mark.parametrize(("pool", "ops"), [((1, 1, 1), []), ((2, 1, 1), []), ((2, 3, 2), ["MaxPool"])])
def test_pooling_words(tmp_path: Path, pool: tuple[int, int, int], ops: list[str]) -> None:
    rng = np.random.default_rng(0)
    after_pool = 8 if pool[1:] == (1, 1) else 3
    layers = [he_layer(rng, "conv", (2, 1, 3), pool), he_layer(rng, "dense", (2 * after_pool, 3))]
    path = tmp_path / "pool.bin"
    path.write_bytes(radar_bytes(layers))
    graph = load_radar(path, input_length=10)
    assert [n.op for n in graph.nodes][:-4] == ["Conv", *ops]


def test_looks_like_radar(tmp_path: Path, patent_bytes: bytes) -> None:
    assert looks_like_radar(PATENT_FILE)
    cases = {
        "empty.bin": b"",
        "short.bin": patent_bytes[:-4],
        "long.bin": patent_bytes + b"\0\0\0\0",
        "odd.bin": patent_bytes + b"\0",
        "onnx.onnx": b"\x08\x07\x12\x04test" + bytes(64),
        "weights.weights": struct.pack("<iiiq", 0, 2, 0, 0) + bytes(40),
        "zeros.bin": bytes(4096),
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        assert not looks_like_radar(tmp_path / name), name
    assert not looks_like_radar(tmp_path / "missing.bin")
    assert not looks_like_radar(tmp_path)


def test_radar_layer_words_follow_the_spec() -> None:
    conv = RadarLayer((6, 1, 5), (1, 5, 2), 6)
    dense = RadarLayer((0, 384, 50), (1, 1, 1), 50)
    assert (conv.out_size, conv.in_size, conv.kernel, conv.output_length(150)) == (6, 1, 5, 71)
    assert (dense.out_size, dense.in_size, dense.weight_shape) == (50, 384, (384, 50))
    assert Layer("dense", np.zeros((384, 50)), np.zeros(50)).words() == dense.words()
