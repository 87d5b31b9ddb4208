"""Loaded networks compute what the spec says (numpy reference) and survive save -> load unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgecnn.importers.radar import load_radar, save_radar
from edgecnn.model import Model
from importers.radar.radar_spec import (
    PATENT_FILE,
    PATENT_LENGTH,
    Layer,
    he_layer,
    radar_bytes,
    reference_forward,
    write_radar_file,
)


def run(graph, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(logits, probabilities) from edgecnn; the logits are the last Gemm's output."""
    logits_name = [n for n in graph.nodes if n.op == "Gemm"][-1].outputs[0]
    result = Model(graph).run({"input": x}, outputs=[logits_name, graph.outputs[0]])
    return result[logits_name], result[graph.outputs[0]]


def assert_matches_reference(graph, layers: list[Layer], x: np.ndarray) -> None:
    logits, probs = run(graph, x)
    ref_logits, ref_probs = reference_forward(layers, x)
    np.testing.assert_allclose(logits, ref_logits, rtol=1e-5, atol=1e-5 * np.abs(ref_logits).max())
    np.testing.assert_allclose(probs, ref_probs, rtol=1e-5, atol=1e-7)


def test_bundled_fixture_is_what_the_helper_writes(patent_layers: list[Layer], patent_bytes: bytes) -> None:
    assert radar_bytes(patent_layers) == patent_bytes


def test_patent_network_matches_numpy_reference(patent_layers: list[Layer]) -> None:
    graph = load_radar(PATENT_FILE)
    assert [n.op for n in graph.nodes] == [
        *("Conv", "AveragePool", "Relu") * 2,
        *("Flatten", "Gemm", "Relu", "Gemm", "Softmax"),
    ]
    x = np.random.default_rng(1).standard_normal((5, 1, PATENT_LENGTH)).astype(np.float32)
    assert_matches_reference(graph, patent_layers, x)
    _, probs = run(graph, x)
    assert probs.shape == (5, 10)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-6)


def test_patent_network_round_trips_byte_for_byte(tmp_path: Path, patent_bytes: bytes) -> None:
    graph = load_radar(PATENT_FILE)
    save_radar(Model(graph), tmp_path / "again.bin")
    assert (tmp_path / "again.bin").read_bytes() == patent_bytes
    again = load_radar(tmp_path / "again.bin")
    x = np.random.default_rng(2).standard_normal((3, 1, PATENT_LENGTH)).astype(np.float32)
    for a, b in zip(run(graph, x), run(again, x)):
        np.testing.assert_array_equal(a, b)


def random_network(seed: int) -> tuple[list[Layer], int, int]:
    """A random member of the family: (layers, input channels, an input length that fits)."""
    rng = np.random.default_rng(seed)
    channels = int(rng.integers(1, 4))
    length = int(rng.integers(40, 90))
    layers, c, n = [], channels, length
    for _ in range(int(rng.integers(0, 4))):
        kernels, kernel = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        pool = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        pool = (1, 1, 1) if pool[1:] == (1, 1) else pool  # the writer's canonical "no pooling"
        after_conv = n - kernel + 1
        if after_conv < max(pool[1], 1) or (pool[1:] != (1, 1) and (after_conv - pool[1]) // pool[2] + 1 < 2):
            break
        layers.append(he_layer(rng, "conv", (kernels, c, kernel), pool))
        n = after_conv if pool[1:] == (1, 1) else (after_conv - pool[1]) // pool[2] + 1
        c = kernels
    if not layers:  # a network without convolutions reads (N, 1, features)
        channels = c = 1
    features = c * n
    for _ in range(int(rng.integers(1, 4))):
        outputs = int(rng.integers(2, 12))
        layers.append(he_layer(rng, "dense", (features, outputs)))
        features = outputs
    return layers, channels, length


@pytest.mark.parametrize("seed", range(16))
def test_random_family_members_match_reference_and_round_trip(tmp_path: Path, seed: int) -> None:
    layers, channels, length = random_network(seed)
    path = write_radar_file(tmp_path / "net.bin", layers)
    graph = load_radar(path, input_length=length)
    assert graph.inputs[0].shape == ("N", channels, length)
    x = np.random.default_rng(seed).standard_normal((2, channels, length)).astype(np.float32)
    assert_matches_reference(graph, layers, x)
    save_radar(graph, tmp_path / "again.bin")
    assert (tmp_path / "again.bin").read_bytes() == path.read_bytes()
    for a, b in zip(run(graph, x), run(load_radar(tmp_path / "again.bin", input_length=length), x)):
        np.testing.assert_array_equal(a, b)


def test_edgecnn_load_reads_radar_files() -> None:
    import edgecnn
    from edgecnn.importers import LOADERS

    if "radar" not in LOADERS:
        pytest.skip("edgecnn.importers does not dispatch to the radar loader yet")
    model = edgecnn.load(PATENT_FILE)
    assert model.inputs[0].shape == ("N", 1, PATENT_LENGTH)
    assert model.outputs[0].shape == ("N", 10)
