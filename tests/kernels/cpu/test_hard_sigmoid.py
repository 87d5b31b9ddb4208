"""HardSigmoid (clip(alpha * x + beta, 0, 1)) fused into conv, dense and pool steps and stand-alone,
against the numpy reference: every CPU kernel that accepts the layer, random geometry and odd sizes,
random alpha/beta, NaN, 1 and 2 threads; and a squeeze-and-excitation block (PP-LCNet's), whose
HardSigmoid the passes fuse into the convolution before it."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Graph, Node, TensorSpec, TensorType
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.kernels.registry import candidate_kernels
from edgecnn.model import Model
from edgecnn.ops.activation import HardSigmoidAttrs
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.fused import FusedActivation, FusedConvAttrs, FusedGemmAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import assert_matches, reference_run
from kernels.cpu.conv.test_conv import conv_cases
from kernels.cpu.gemm.test_dense import gemm_cases
from kernels.cpu.pool.test_pool import pool_cases
from kernels.cpu.pool.test_pool_fused import fused
from kernels.support import fast_run, tuned

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

hard_sigmoids = st.builds(
    lambda scale, offset: FusedActivation("hard_sigmoid", scale=scale, offset=offset),
    st.sampled_from([0.2, 1 / 6, 1.0, -0.5]),
    st.sampled_from([0.5, 0.0, 0.25]),
)
"""ONNX's defaults (0.2, 0.5), PyTorch's (1/6, 0.5) and others, a negative slope included."""


def with_activation(attrs: Any, activation: FusedActivation) -> Any:
    """``attrs`` (a fused op's) with ``activation`` in place of its own."""
    return replace(attrs, **{f.name: getattr(activation, f.name) for f in fields(FusedActivation)})


def each_kernel(
    node: Node, inputs: list[np.ndarray], constants: tuple[int, ...], threads: int
) -> dict[str, Any]:
    """The output of every CPU kernel that can run ``node`` (its constant inputs known at plan time)."""
    types = [TensorType(str(x.dtype), tuple(x.shape)) for x in inputs]
    values = [x if i in constants else None for i, x in enumerate(inputs)]
    fast_run("Relu", NoAttrs(), [np.zeros(1, np.float32)], (), 1)  # the CPU runtime started, as a plan does
    results = {}
    with cpu_threads(threads):
        for entry in candidate_kernels(node, types, values):
            results[entry.name] = np.asarray(entry.factory(node, types, values)(*inputs))
    assert results, f"no CPU kernel runs {node.op} with hard_sigmoid"
    return results


def check_each(results: dict[str, np.ndarray], expected: np.ndarray, magnitude: float) -> None:
    for name, actual in results.items():
        try:
            assert_matches(actual, expected, magnitude)
        except AssertionError as err:
            raise AssertionError(f"kernel {name}: {err}") from None


@SETTINGS
@given(case=conv_cases(), activation=hard_sigmoids)
def test_every_conv_kernel_applies_hard_sigmoid(case: dict[str, Any], activation: FusedActivation) -> None:
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x_shape"], dtype=np.float32)
    w = rng.standard_normal(case["w_shape"], dtype=np.float32)
    inputs = [x, w] + ([rng.standard_normal(case["w_shape"][0], dtype=np.float32)] if case["bias"] else [])
    attrs = FusedConvAttrs(
        **case["geometry"], activation="hard_sigmoid", scale=activation.scale, offset=activation.offset
    )
    node = Node("FusedConv", "conv", [f"in{i}" for i in range(len(inputs))], ["out"], attrs)
    constants = tuple(range(1, len(inputs)))
    expected = reference_run("FusedConv", attrs, inputs, constants)
    magnitude = abs(activation.scale) * np.abs(x).max() * np.abs(w).sum(axis=(1, 2, 3)).max() + 4.0
    check_each(each_kernel(node, inputs, constants, case["threads"]), expected, magnitude)


@pytest.mark.parametrize(
    "x_shape, w_shape, pads, zeros",
    [
        ((1, 16, 13, 11), (24, 16, 3, 3), (1, 1, 1, 1), 0.0),  # Winograd's layers
        ((2, 32, 9, 7), (17, 32, 3, 3), (1, 0, 1, 0), 0.95),  # pruned: the sparse kernel
        ((1, 8, 5, 5), (8, 8, 3, 3), (0, 0, 0, 0), 0.0),
    ],
)
def test_conv_layers_of_each_algorithm_apply_hard_sigmoid(
    x_shape: tuple[int, ...], w_shape: tuple[int, ...], pads: tuple[int, ...], zeros: float
) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = rng.standard_normal(w_shape, dtype=np.float32)
    w[rng.random(w.shape) < zeros] = 0.0
    b = rng.standard_normal(w_shape[0], dtype=np.float32)
    attrs = FusedConvAttrs(pads=pads, activation="hard_sigmoid", scale=0.2, offset=0.5)
    node = Node("FusedConv", "conv", ["in0", "in1", "in2"], ["out"], attrs)
    expected = reference_run("FusedConv", attrs, [x, w, b], (1, 2))
    results = each_kernel(node, [x, w, b], (1, 2), 2)
    assert len(results) > 1, results.keys()
    check_each(results, expected, 0.2 * np.abs(x).max() * np.abs(w).sum(axis=(1, 2, 3)).max() + 4.0)


@SETTINGS
@given(case=gemm_cases(), activation=hard_sigmoids, threads=st.sampled_from([1, 2]), sparse=st.booleans())
def test_every_dense_kernel_applies_hard_sigmoid(
    case: dict[str, Any], activation: FusedActivation, threads: int, sparse: bool
) -> None:
    rng = np.random.default_rng(case["seed"])
    a = rng.standard_normal(case["a_shape"], dtype=np.float32)
    b = rng.standard_normal(case["b_shape"], dtype=np.float32)
    if sparse:  # pruned weights: the sparse kernel may take the layer too
        b[rng.random(b.shape) < 0.9] = 0.0
    inputs = [a, b] + (
        [] if case["c_shape"] is None else [rng.standard_normal(case["c_shape"], dtype=np.float32)]
    )
    gemm = {name: getattr(case["attrs"], name) for name in ("alpha", "beta", "trans_a", "trans_b")}
    attrs = with_activation(FusedGemmAttrs(**gemm), activation)
    node = Node("FusedGemm", "dense", [f"in{i}" for i in range(len(inputs))], ["out"], attrs)
    constants = tuple(range(1, len(inputs)))
    expected = reference_run("FusedGemm", attrs, inputs, constants)
    magnitude = abs(activation.scale * attrs.alpha) * np.abs(a).max() * np.abs(b).max() * a.size + 10.0
    check_each(each_kernel(node, inputs, constants, threads), expected, magnitude)


@SETTINGS
@given(case=pool_cases(), activation=hard_sigmoids)
def test_fused_pools_apply_hard_sigmoid(case: dict[str, Any], activation: FusedActivation) -> None:
    op, attrs = fused(case["attrs"], activation)
    x = 3 * np.random.default_rng(case["seed"]).standard_normal(case["shape"], dtype=np.float32)
    actual, kernel = fast_run(op, attrs, [x], (), case["threads"])
    assert kernel == "pool_2d"
    assert_matches(actual, reference_run(op, attrs, [x], ()), np.abs(x).max())


@pytest.mark.parametrize("threads", [1, 2])
def test_fused_hard_sigmoid_keeps_nan_and_saturates(threads: int) -> None:
    x = np.linspace(-8, 8, 2 * 3 * 7 * 9, dtype=np.float32).reshape(2, 3, 7, 9)
    x[1, 2, 3, 4] = np.nan
    w = np.ones((5, 3, 1, 1), np.float32)
    attrs = FusedConvAttrs(activation="hard_sigmoid", scale=0.2, offset=0.5)
    with tuned(grain=0):
        actual, kernel = fast_run("FusedConv", attrs, [x, w], (1,), threads)
    expected = reference_run("FusedConv", attrs, [x, w], (1,))
    assert kernel != "reference" and np.isnan(actual[1, :, 3, 4]).all()
    assert (actual[0] == 0).any() and (actual[1] == 1).any()
    assert_matches(actual, expected, 30.0)


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 19), min_size=1, max_size=4),
    alpha=st.sampled_from([0.2, 1 / 6, -0.5]),
    beta=st.sampled_from([0.5, 0.0]),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_stand_alone_hard_sigmoid(
    shape: list[int], alpha: float, beta: float, threads: int, seed: int
) -> None:
    x = 4 * np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    x.reshape(-1)[0] = np.nan
    attrs = HardSigmoidAttrs(alpha, beta)
    with tuned(eltwise_min_size=0, grain=0, memory_bound_grain=0):
        actual, kernel = fast_run("HardSigmoid", attrs, [x], (), threads)
    assert kernel == "activation"
    assert_matches(actual, reference_run("HardSigmoid", attrs, [x], ()), 4.0)


def se_block(channels: int, height: int, width: int) -> Graph:
    """PP-LCNet's squeeze-and-excitation: y = x * HardSigmoid(conv(relu(conv(mean(x))))), the first
    3x3 convolution before it."""
    rng = np.random.default_rng(3)
    squeezed = max(1, channels // 4)
    weights = {
        "w0": rng.standard_normal((channels, channels, 3, 3), dtype=np.float32) / 3,
        "w1": rng.standard_normal((squeezed, channels, 1, 1), dtype=np.float32),
        "b1": rng.standard_normal(squeezed, dtype=np.float32),
        "w2": rng.standard_normal((channels, squeezed, 1, 1), dtype=np.float32),
        "b2": rng.standard_normal(channels, dtype=np.float32),
    }
    nodes = [
        Node("Conv", "conv0", ["x", "w0"], ["c0"], ConvAttrs(pads=(1, 1, 1, 1))),
        Node("GlobalAveragePool", "squeeze", ["c0"], ["s"], NoAttrs()),
        Node("Conv", "reduce", ["s", "w1", "b1"], ["r"], ConvAttrs()),
        Node("Relu", "relu", ["r"], ["a"]),
        Node("Conv", "expand", ["a", "w2", "b2"], ["e"], ConvAttrs()),
        Node("HardSigmoid", "gate", ["e"], ["g"], HardSigmoidAttrs()),
        Node("Mul", "excite", ["c0", "g"], ["y"]),
    ]
    spec = TensorSpec("x", "float32", (2, channels, height, width))
    return Graph([spec], ["y"], nodes, weights, name="se_block")


@pytest.mark.parametrize("channels, height, width", [(16, 7, 9), (5, 3, 3)])
def test_squeeze_and_excitation_fuses_hard_sigmoid(channels: int, height: int, width: int) -> None:
    graph = se_block(channels, height, width)
    model = Model(graph, RuntimeOptions.resolve(threads=2, device="cpu"))
    x = np.random.default_rng(1).standard_normal((2, channels, height, width), dtype=np.float32)
    steps = {step.node.name: step for step in model.plan_for({"x": x}).steps}
    gate = steps["expand"]
    assert gate.node.op == "FusedConv" and gate.node.attrs.activation == "hard_sigmoid", steps
    assert (gate.node.attrs.scale, gate.node.attrs.offset) == pytest.approx((0.2, 0.5))
    assert gate.kernel.name != "reference" and "gate" not in steps
    reference = Model(graph, RuntimeOptions.resolve(threads=1, device="reference"))
    assert_matches(model(x), reference(x), 30.0)
