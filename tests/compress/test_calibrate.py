"""Activation calibration: min-max, percentile and KL ranges on known distributions, observation
through Model.run on a small network, calibration inputs from a directory, and refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edgecnn.compress.calibrate import Histogram, Range, calibration_inputs, observe
from edgecnn.errors import InputError
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.fused import FusedConvAttrs
from edgecnn.ops.pool import MaxPoolAttrs


def small_network(seed: int = 0) -> Graph:
    """FusedConv(relu) -> MaxPool -> Conv: a signed and a non-negative activation to observe."""
    rng = np.random.default_rng(seed)
    return Graph(
        [TensorSpec("x", "float32", (1, 2, 9, 9))],
        ["y"],
        [
            Node("FusedConv", "conv1", ["x", "w1", "b1"], ["a1"], FusedConvAttrs(pads=(1, 1, 1, 1), activation="relu")),
            Node("MaxPool", "pool", ["a1"], ["p1"], MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2))),
            Node("Conv", "conv2", ["p1", "w2"], ["y"], ConvAttrs()),
        ],
        {
            "w1": rng.standard_normal((4, 2, 3, 3)).astype(np.float32),
            "b1": rng.standard_normal(4).astype(np.float32),
            "w2": rng.standard_normal((3, 4, 3, 3)).astype(np.float32),
        },
    )  # fmt: skip


def samples(count: int, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, 2, 9, 9)).astype(np.float32) for _ in range(count)]


def test_minmax_is_the_extremes_over_all_samples() -> None:
    graph, inputs = small_network(), samples(4)
    ranges = observe(graph, ["x", "a1", "y"], inputs, method="minmax")
    from edgecnn.model import Model

    model = Model(graph)
    seen = [model.run(x, outputs=["a1", "y"]) for x in inputs]
    assert ranges["x"] == Range(min(float(x.min()) for x in inputs), max(float(x.max()) for x in inputs))
    for name in ("a1", "y"):
        low = min(float(s[name].min()) for s in seen)
        high = max(float(s[name].max()) for s in seen)
        assert ranges[name].low == pytest.approx(low, rel=1e-6, abs=1e-6)
        assert ranges[name].high == pytest.approx(high, rel=1e-6, abs=1e-6)
    assert ranges["a1"].low >= 0.0  # after the fused ReLU


@pytest.mark.parametrize("method", ["percentile", "kl"])
def test_outliers_are_clipped_and_the_bulk_kept(method: str) -> None:
    """One large value among many normal ones: min-max spans it, percentile and KL do not."""
    rng = np.random.default_rng(2)
    bulk = rng.standard_normal(200_000).astype(np.float32)
    values = np.concatenate([bulk, [50.0]]).astype(np.float32).reshape(1, 1, -1, 1)
    graph = Graph([TensorSpec("x", "float32", values.shape)], ["x"], [], {})
    (minmax,) = observe(graph, ["x"], [values], method="minmax").values()
    (clipped,) = observe(graph, ["x"], [values], method=method, percentile=99.9).values()
    assert minmax.high == 50.0
    assert 2.0 < clipped.high < 20.0, clipped
    assert -20.0 < clipped.low < -2.0, clipped


def test_histogram_percentile_and_kl_on_a_uniform_distribution() -> None:
    histogram = Histogram(10.0, bins=1000)
    histogram.add(np.linspace(-10, 10, 100_001, dtype=np.float32))
    assert histogram.percentile(50.0) == pytest.approx(5.0, abs=0.02)
    assert histogram.percentile(100.0) == pytest.approx(10.0)
    # nothing to gain by clipping a flat distribution: KL keeps (almost) all of it
    assert histogram.kl_threshold(128) > 9.0


def test_empty_histogram_has_zero_thresholds() -> None:
    histogram = Histogram(0.0, bins=256)
    assert histogram.percentile(99.0) == 0.0
    assert histogram.kl_threshold(128) == 0.0


def test_calibration_inputs_from_images_and_arrays(tmp_path: Path) -> None:
    Image.fromarray(np.full((20, 30), 255, np.uint8)).save(tmp_path / "a.png")
    Image.fromarray(np.zeros((5, 5, 3), np.uint8)).save(tmp_path / "b.jpg")
    np.save(tmp_path / "c.npy", np.ones((1, 12, 12), np.float32))
    (tmp_path / "notes.txt").write_text("ignored")
    loaded = calibration_inputs(tmp_path, TensorSpec("x", "float32", (1, 1, 12, 12)))
    assert [a.shape for a in loaded] == [(1, 1, 12, 12)] * 3
    assert loaded[0].max() == pytest.approx(1.0)  # pixels scaled to 0..1
    assert loaded[1].max() == 0.0
    assert len(calibration_inputs(tmp_path, TensorSpec("x", "float32", (1, 1, 12, 12)), limit=2)) == 2


def test_calibration_input_refusals(tmp_path: Path) -> None:
    spec = TensorSpec("x", "float32", (1, 1, 4, 4))
    with pytest.raises(InputError, match="not found"):
        calibration_inputs(tmp_path / "missing", spec)
    with pytest.raises(InputError, match=r"no \.npy arrays or images"):
        calibration_inputs(tmp_path, spec)
    np.save(tmp_path / "wrong.npy", np.ones((3, 4), np.float32))
    with pytest.raises(InputError, match="does not fit"):
        calibration_inputs(tmp_path, spec)


def test_observe_refusals() -> None:
    graph = small_network()
    with pytest.raises(InputError, match="unknown calibration method"):
        observe(graph, ["x"], samples(1), method="mse")
    with pytest.raises(InputError, match="at least one sample"):
        observe(graph, ["x"], [])
    with pytest.raises(InputError, match="percentile"):
        observe(graph, ["x"], samples(1), method="percentile", percentile=0.0)
    with pytest.raises(InputError, match="no finite values"):
        observe(graph, ["x"], [np.full((1, 2, 9, 9), np.inf, np.float32)])


def test_range_validates_itself() -> None:
    with pytest.raises(ValueError):
        Range(1.0, 0.0)
    with pytest.raises(ValueError):
        Range(0.0, float("nan"))
