"""The int8 rewrite: weight and activation grids, which layers change and how they chain, accuracy
against float32, .ecnn round trips of int8 initialisers and file size, and the compress command."""

from __future__ import annotations

import tracemalloc
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

import edgecnn.kernels.cpu.int8.steps  # noqa: F401  (registers the int8 kernels)
from edgecnn.cli import compress_cmd
from edgecnn.compress.calibrate import Range
from edgecnn.compress.int8 import (
    activation_params,
    agreement,
    layers_to_quantize,
    quantize_int8,
    quantize_weights,
    tensors_to_observe,
    to_int8,
)
from edgecnn.format import load_ecnn, save_ecnn
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.kernels.cpu.int8.dot_kernel import available
from edgecnn.model import Model
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import FusedConvAttrs
from edgecnn.ops.shape import FlattenAttrs
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import run_without_arena

DATA = Path(str(resources.files("edgecnn") / "data" / "simplecnn"))


def network(seed: int = 0, hidden: int = 64, channels: int = 6) -> Graph:
    """Conv(relu) -> Conv(relu) -> Flatten -> Gemm(alpha, beta, B not transposed) -> Gemm."""
    rng = np.random.default_rng(seed)

    def weights(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    return Graph(
        [TensorSpec("x", "float32", (2, 3, 10, 10))],
        ["y"],
        [
            Node("FusedConv", "conv1", ["x", "w1", "b1"], ["a1"], FusedConvAttrs(pads=(1, 1, 1, 1), activation="relu")),
            Node("FusedConv", "conv2", ["a1", "w2", "b2"], ["a2"], FusedConvAttrs(strides=(2, 2), activation="relu")),
            Node("Flatten", "flatten", ["a2"], ["f"], FlattenAttrs()),
            Node("Gemm", "fc1", ["f", "w3", "b3"], ["h"], GemmAttrs(alpha=0.5, beta=2.0)),
            Node("Gemm", "fc2", ["h", "w4"], ["y"], GemmAttrs(trans_b=True)),
        ],
        {
            "w1": weights(8, 3, 3, 3), "b1": weights(8), "w2": weights(channels, 8, 3, 3), "b2": weights(channels),
            "w3": weights(channels * 4 * 4, hidden, scale=0.2), "b3": weights(1, hidden), "w4": weights(10, hidden),
        },
    )  # fmt: skip


def inputs(count: int, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((2, 3, 10, 10)).astype(np.float32) for _ in range(count)]


def test_weights_are_symmetric_per_output_channel() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 3, 2, 2)).astype(np.float32)
    w[2] = 0.0
    q, scales = quantize_weights(w)
    assert q.dtype == np.int8 and q.shape == w.shape and np.abs(q).max() == 127
    assert scales[2] == 1.0 and not q[2].any()
    expected = np.abs(w.reshape(5, -1)).max(axis=1) / 127
    np.testing.assert_allclose(scales[[0, 1, 3, 4]], expected[[0, 1, 3, 4]], rtol=1e-6)
    error = np.abs(q.astype(np.float32) * scales[:, None, None, None] - w)
    assert np.all(error <= scales[:, None, None, None] / 2 + 1e-7)


@pytest.mark.parametrize(("low", "high"), [(0.0, 6.0), (-1.0, 3.0), (0.5, 2.0), (-4.0, -1.0), (0.0, 0.0)])
def test_activation_grid_holds_zero_exactly_and_covers_the_range(low: float, high: float) -> None:
    q = activation_params(Range(low, high))
    assert q.scale > 0
    assert isinstance(q.zero_point, np.uint8)
    lo, hi = min(low, 0.0), max(high, 0.0)
    assert (0 - int(q.zero_point)) * float(q.scale) <= lo + float(q.scale) / 2
    assert (255 - int(q.zero_point)) * float(q.scale) >= hi - float(q.scale) / 2
    if low >= 0.0:
        assert q.zero_point == 0  # a ReLU output uses all 256 steps, as onnxruntime's grid does


def test_rewrite_chains_int8_layers_and_drops_float_weights() -> None:
    graph = network()
    ranges = {name: Range(-4.0, 4.0) for name in tensors_to_observe(graph)}
    rewritten = to_int8(graph, ranges)
    assert [n.op for n in rewritten.nodes] == ["Int8Conv", "Int8Conv", "Flatten", "Int8Gemm", "Int8Gemm"]
    by_name = {n.name: n for n in rewritten.nodes}
    assert by_name["conv1"].inputs[6] == "a1::scale"  # feeds only conv2: stays int8
    assert by_name["conv2"].inputs[6] == ""  # feeds Flatten: float32
    assert by_name["fc1"].inputs[6] == "h::scale"
    assert by_name["fc2"].inputs[6] == ""  # graph output
    for name in ("w1", "w2", "w3", "w4", "b1", "b2", "b3"):
        assert name not in rewritten.initializers
    assert rewritten.initializers["conv1::weight_int8"].dtype == np.int8
    assert rewritten.initializers["fc1::bias_int32"].dtype == np.int32
    assert rewritten.initializers["fc1::weight_int8"].shape == (64, 96)  # stored transposed (N, K)
    with pytest.raises(ValueError, match="no calibrated range"):
        to_int8(graph, {})


def test_int8_model_follows_the_float_model() -> None:
    graph, samples = network(), inputs(6)
    rewritten = quantize_int8(graph, samples, method="minmax")
    model = Model(rewritten)
    plan = model.plan_for(samples[0])
    assert {s.kernel.name for s in plan.steps if s.node.op.startswith("Int8")} in (
        {"int8_dot_conv", "int8_dense"},  # numba compiling for AVX2: the dot-product convolution
        {"int8_im2col_gemm", "int8_dense"},
    )
    expected, actual = Model(graph).run(samples[0])["y"], model.run(samples[0])["y"]
    assert actual.dtype == np.float32
    assert np.abs(actual - expected).max() < 0.05 * np.abs(expected).max()
    result = agreement(graph, rewritten, samples)
    assert result.samples == 12 and result.top1 >= 0.8


def test_rewrite_writes_u8_activations_and_s8_weights_as_onnxruntime_does() -> None:
    """uint8 activation grids, int8 weights, int32 bias: the chained uint8 tensor runs on the
    dot-product kernel where it compiles, equal to the numpy reference integer for integer."""
    graph, samples = network(), inputs(4)
    rewritten = quantize_int8(graph, samples)
    layers = {n.name: n for n in rewritten.nodes if n.op.startswith("Int8")}
    for node in layers.values():
        assert rewritten.initializers[node.inputs[2]].dtype == np.uint8
        assert rewritten.initializers[node.inputs[3]].dtype == np.int8
        assert node.inputs[5] == ""  # symmetric weights: no zero point
    assert rewritten.initializers[layers["conv1"].inputs[7]].dtype == np.uint8
    fast = Model(rewritten, RuntimeOptions.resolve(threads=1))
    reference = Model(rewritten, RuntimeOptions.resolve(threads=1, device="reference"))
    kernels = {s.node.name: s.kernel.name for s in fast.plan_for(samples[0]).steps}
    assert kernels["conv1"] == kernels["conv2"] == ("int8_dot_conv" if available() else "int8_im2col_gemm")
    for x in samples[:2]:
        got, want = fast.run(x, outputs=["a1", "y"]), reference.run(x, outputs=["a1", "y"])
        assert got["a1"].dtype == np.uint8
        np.testing.assert_array_equal(got["a1"], want["a1"])
        np.testing.assert_array_equal(got["y"], want["y"])


@pytest.mark.parametrize("method", ["percentile", "kl"])
def test_other_calibration_methods_also_give_working_models(method: str) -> None:
    graph, samples = network(), inputs(4)
    rewritten = quantize_int8(graph, samples, method=method)
    expected, actual = Model(graph).run(samples[0])["y"], Model(rewritten).run(samples[0])["y"]
    assert np.abs(actual - expected).max() < 0.2 * np.abs(expected).max()


def test_layers_the_rewrite_leaves_alone() -> None:
    graph = network()
    graph.nodes[3].attrs = GemmAttrs(trans_a=True)  # A transposed
    graph.nodes[4].inputs[1] = "f_runtime"  # weights computed at run time
    graph.inputs.append(TensorSpec("f_runtime", "float32", (10, 64)))
    graph.nodes.insert(0, Node("Conv", "conv1d", ["x1d", "w1d"], ["y1d"], ConvAttrs()))  # 1-D conv
    graph.initializers["w1d"] = np.ones((2, 1, 3), np.float32)
    assert [n.name for n in layers_to_quantize(graph)] == ["conv1", "conv2"]


def test_ecnn_round_trip_keeps_int8_weights_and_is_small(tmp_path: Path) -> None:
    graph, samples = network(hidden=256, channels=32), inputs(3)
    rewritten = quantize_int8(graph, samples)
    save_ecnn(graph, tmp_path / "float.ecnn")
    save_ecnn(rewritten, tmp_path / "int8.ecnn")
    loaded = load_ecnn(tmp_path / "int8.ecnn")
    for name, value in rewritten.initializers.items():
        assert loaded.initializers[name].dtype == value.dtype
        np.testing.assert_array_equal(loaded.initializers[name], value)
    size = (tmp_path / "int8.ecnn").stat().st_size / (tmp_path / "float.ecnn").stat().st_size
    assert size <= 0.27, size
    np.testing.assert_array_equal(Model(loaded).run(samples[0])["y"], Model(rewritten).run(samples[0])["y"])


def wide_network() -> Graph:
    """Int8 activations larger than the arena test's 32 KiB allowance: conv 3x3, conv 3x3 stride 2,
    a pointwise conv, then a Gemm (float input, quantised on the way in) and a Gemm to the output."""
    rng = np.random.default_rng(3)

    def weights(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    return Graph(
        [TensorSpec("x", "float32", (1, 3, 48, 48))],
        ["y"],
        [
            Node("FusedConv", "c1", ["x", "w1", "b1"], ["a1"], FusedConvAttrs(pads=(1, 1, 1, 1), activation="relu")),
            Node("FusedConv", "c2", ["a1", "w2"], ["a2"], FusedConvAttrs(pads=(1, 1, 1, 1), strides=(2, 2))),
            Node("FusedConv", "c3", ["a2", "w3", "b3"], ["a3"], FusedConvAttrs(activation="relu")),
            Node("Flatten", "flatten", ["a3"], ["f"], FlattenAttrs()),
            Node("Gemm", "fc1", ["f", "w4", "b4"], ["h"], GemmAttrs(trans_b=True)),
            Node("Gemm", "fc2", ["h", "w5"], ["y"], GemmAttrs(trans_b=True)),
        ],
        {
            "w1": weights(16, 3, 3, 3), "b1": weights(16), "w2": weights(24, 16, 3, 3),
            "w3": weights(8, 24, 1, 1), "b3": weights(8), "w4": weights(32, 8 * 24 * 24), "b4": weights(32),
            "w5": weights(10, 32),
        },
    )  # fmt: skip


def test_int8_model_runs_in_the_arena_without_allocating() -> None:
    """Every int8 step writes into the arena (run_into): a steady-state run allocates only its
    result (tracemalloc), where the plain executor allocates every activation."""
    graph = wide_network()
    samples = [np.random.default_rng(s).standard_normal((1, 3, 48, 48)).astype(np.float32) for s in range(3)]
    model = Model(quantize_int8(graph, samples), RuntimeOptions.resolve(threads=1))
    x = samples[0]
    plan = model.plan_for(x)
    int8_steps = [s for s in plan.steps if s.node.op.startswith("Int8")]
    assert [s.kernel.name.replace("dot_conv", "im2col_gemm") for s in int8_steps] == (
        ["int8_im2col_gemm"] * 3 + ["int8_dense"] * 2
    )
    assert all(hasattr(s.kernel.run, "run_into") for s in int8_steps)
    expected = run_without_arena(plan, {"x": x}, ["y"])["y"]
    for _ in range(2):
        np.testing.assert_array_equal(model.run(x)["y"], expected)  # warm-up: arena, scratch
    peak, returned = _traced_peak(lambda: model.run(x))
    activations = plan.memory.buffers.naive_bytes
    assert peak <= returned + 32 * 1024 < activations
    plain_peak, _ = _traced_peak(lambda: run_without_arena(plan, {"x": x}, ["y"]))
    assert plain_peak > activations // 2


def _traced_peak(run: object) -> tuple[int, int]:
    """(peak bytes traced during ``run()`` above the level before it, bytes of the arrays it returned)."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        result = run()  # type: ignore[operator]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before, sum(v.nbytes for v in result.values())


app = typer.Typer()
app.command(compress_cmd.NAME)(compress_cmd.command)


@app.callback()
def _group() -> None:
    """Keeps `compress` a sub-command, as in the real app."""


def test_compress_command_with_calibration(tmp_path: Path) -> None:
    out = tmp_path / "face8.ecnn"
    args = [str(DATA / "face_binary_cls.onnx"), "--quantize", "int8", "--iterations", "1", "--samples", "2"]
    args += ["--calibration", str(DATA / "samples"), "--calibration-method", "percentile", "-o", str(out)]
    result = CliRunner().invoke(app, ["compress", *args])
    assert result.exit_code == 0, result.output
    for text in ("int8 layers (percentile)", "Int8Conv", "Int8Gemm", "2 calibration input(s)", "file size"):
        assert text in result.output
    assert {n.op for n in load_ecnn(out).nodes} >= {"Int8Conv", "Int8Gemm"}


def test_compress_command_calibration_refusals(tmp_path: Path) -> None:
    base = [str(DATA / "face_binary_cls.onnx"), "-o", str(tmp_path / "x.ecnn")]
    result = CliRunner().invoke(app, ["compress", *base, "--calibration", str(DATA / "samples")])
    assert result.exit_code != 0 and "needs --quantize int8" in result.output
    result = CliRunner().invoke(app, ["compress", *base, "--quantize", "int8", "--calibration-method", "mse"])
    assert result.exit_code != 0 and "minmax, percentile or kl" in result.output


def test_storage_only_int8_says_so(tmp_path: Path) -> None:
    args = [str(DATA / "face_binary_cls.onnx"), "--quantize", "int8", "--iterations", "1", "--samples", "1"]
    result = CliRunner().invoke(app, ["compress", *args, "-o", str(tmp_path / "w8.ecnn")])
    assert result.exit_code == 0, result.output
    assert "int8 weight storage only" in result.output
