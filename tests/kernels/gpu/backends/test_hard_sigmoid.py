"""HardSigmoid (clip(alpha * x + beta, 0, 1)) on every GPU-ish backend: fused into convolutions (im2col
+ GEMM, depthwise), dense layers and pools with random alpha/beta and odd sizes, stand-alone, and a
squeeze-and-excitation block whose gate the passes fuse into its convolution; all against the
numpy reference."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.activation import HardSigmoidAttrs
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.fused import FusedConvAttrs, FusedGemmAttrs
from edgecnn.ops.fused_pool import FusedAveragePoolAttrs, FusedMaxPoolAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import assert_matches
from kernels.gpu.backends.support import Backend, rand

SETTINGS = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
PARAMS = st.sampled_from([(0.2, 0.5), (1 / 6, 0.5), (-0.5, 0.25)])  # ONNX's, PyTorch's, a negative slope
"""(alpha, beta) = the fused steps' (scale, offset)."""


@SETTINGS
@given(
    params=PARAMS,
    depthwise=st.booleans(),
    height=st.integers(1, 13),
    width=st.integers(1, 13),
    channels=st.integers(1, 7),
    seed=st.integers(0, 2**16),
)
def test_fused_conv_applies_hard_sigmoid(
    device: Backend,
    params: tuple[float, float],
    depthwise: bool,
    height: int,
    width: int,
    channels: int,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    x = 3 * rand(rng, 2, channels, height, width)
    w = rand(rng, channels, 1, 3, 3) if depthwise else rand(rng, 5, channels, 3, 3)
    scale, offset = params
    attrs = FusedConvAttrs(
        group=channels if depthwise else 1,
        pads=(1, 1, 1, 1),
        activation="hard_sigmoid",
        scale=scale,
        offset=offset,
    )
    device.check_node("FusedConv", attrs, [x, w, rand(rng, w.shape[0])], (1, 2), None, 9 * channels * 3)


@SETTINGS
@given(
    params=PARAMS, m=st.integers(1, 9), k=st.integers(1, 70), n=st.integers(1, 33), seed=st.integers(0, 2**16)
)
def test_fused_gemm_applies_hard_sigmoid(
    device: Backend, params: tuple[float, float], m: int, k: int, n: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    scale, offset = params
    attrs = FusedGemmAttrs(alpha=0.5, trans_b=True, activation="hard_sigmoid", scale=scale, offset=offset)
    a, b, c = 4 * rand(rng, m, k), rand(rng, n, k), rand(rng, n)
    device.check_node("FusedGemm", attrs, [a, b, c], (1, 2), "fused_gemm", 4 * k)


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("FusedMaxPool", FusedMaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2), ceil_mode=True)),
        (
            "FusedAveragePool",
            FusedAveragePoolAttrs(kernel_shape=(2, 3), pads=(1, 0, 1, 2), count_include_pad=True),
        ),
    ],
)
def test_fused_pools_apply_hard_sigmoid(device: Backend, op: str, attrs: Any) -> None:
    hard = replace(attrs, activation="hard_sigmoid", scale=0.2, offset=0.5)
    x = 4 * rand(np.random.default_rng(3), 2, 3, 9, 11)
    kernel = "fused_max_pool" if op == "FusedMaxPool" else "fused_average_pool"
    for forms in device.kernel_forms():
        with forms():
            device.check_node(op, hard, [x], kernel=kernel)


@pytest.mark.parametrize("attrs", [HardSigmoidAttrs(), HardSigmoidAttrs(alpha=-0.5, beta=0.25)])
def test_stand_alone_hard_sigmoid(device: Backend, attrs: HardSigmoidAttrs) -> None:
    x = 4 * rand(np.random.default_rng(4), 3, 5, 7)
    x[0, 0, 0] = np.nan
    device.check_node("HardSigmoid", attrs, [x], kernel="hard_sigmoid")


def se_block() -> Graph:
    """y = c * HardSigmoid(conv(relu(conv(mean(c))))), c = conv(x): PP-LCNet's squeeze-and-excitation."""
    rng = np.random.default_rng(3)
    weights = {
        "w0": rand(rng, 8, 3, 3, 3),
        "w1": rand(rng, 2, 8, 1, 1),
        "w2": rand(rng, 8, 2, 1, 1),
        "b2": rand(rng, 8),
    }
    nodes = [
        Node("Conv", "conv0", ["x", "w0"], ["c"], ConvAttrs(pads=(1, 1, 1, 1))),
        Node("GlobalAveragePool", "squeeze", ["c"], ["s"], NoAttrs()),
        Node("Conv", "reduce", ["s", "w1"], ["r"], ConvAttrs()),
        Node("Relu", "relu", ["r"], ["a"]),
        Node("Conv", "expand", ["a", "w2", "b2"], ["e"], ConvAttrs()),
        Node("HardSigmoid", "gate", ["e"], ["g"], HardSigmoidAttrs()),
        Node("Mul", "excite", ["c", "g"], ["y"]),
    ]
    return Graph([TensorSpec("x", "float32", (2, 3, 9, 7))], ["y"], nodes, weights, name="se_block")


def test_squeeze_and_excitation_fuses_hard_sigmoid(device: Backend) -> None:
    graph = se_block()
    model = device.model(graph)
    x = rand(np.random.default_rng(1), 2, 3, 9, 7)
    steps = {step.node.name: step for step in model.plan_for({"x": x}).steps}
    gate = steps["expand"]
    assert (
        gate.node.op == "FusedConv" and gate.node.attrs.activation == "hard_sigmoid" and "gate" not in steps
    )
    assert gate.kernel.name.startswith(f"{device.kind}_"), gate.kernel.name
    reference = Model(graph, RuntimeOptions.resolve(threads=1, device="reference"))
    assert_matches(model(x), reference(x), magnitude=30.0)
