"""An activation op registered after the GPU kernels were imported has no formula in their device
source: the GPU backends decline the fused steps that apply it (FusedConv, FusedGemm, the fused
pools), which then run on the reference kernel, and the model still computes the right result."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.kernels.gpu.activations import applies_activation
from edgecnn.model import Model
from edgecnn.ops import registry
from edgecnn.ops.common import same_as_first
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import FusedConvAttrs, activation_names
from edgecnn.ops.pool import MaxPoolAttrs
from edgecnn.ops.registry import FusableActivation, NoAttrs, register_op
from edgecnn.ops.shape import FlattenAttrs
from edgecnn.ops.traits import broadcast_per_image
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import assert_matches
from kernels.gpu.backends.support import Backend, rand


def softsign(attrs: NoAttrs, x: np.ndarray) -> np.ndarray:
    return np.asarray(x / (1 + np.abs(x)), dtype=x.dtype)


@pytest.fixture
def test_softsign() -> Iterator[str]:
    """Registers TestSoftsign (fusable as "test_softsign", the next code) for one test."""
    register_op(
        "TestSoftsign",
        infer=same_as_first,
        per_sample=broadcast_per_image,
        activations=[FusableActivation("test_softsign", len(activation_names()))],
    )(softsign)
    try:
        yield "TestSoftsign"
    finally:
        del registry._REGISTRY["TestSoftsign"]


def test_the_gpu_applies_only_activations_it_has_a_formula_for(test_softsign: str) -> None:
    def conv(activation: str) -> Node:
        return Node("FusedConv", "conv", ["x", "w"], ["y"], FusedConvAttrs(activation=activation))

    assert applies_activation(conv("relu")) and applies_activation(conv("none"))
    assert not applies_activation(conv("test_softsign"))
    assert applies_activation(Node("Conv", "conv", ["x", "w"], ["y"], ConvAttrs()))


def activation_net(activation: str) -> Graph:
    """Conv, ``activation``, MaxPool, ``activation``, Flatten, Gemm, ``activation``, then a Conv with
    Relu: the passes fuse each activation into the layer before it."""
    rng = np.random.default_rng(7)
    nodes = [
        Node("Conv", "conv", ["x", "w"], ["c"], ConvAttrs(pads=(1, 1, 1, 1))),
        Node(activation, "act1", ["c"], ["a1"]),
        Node("MaxPool", "pool", ["a1"], ["p"], MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2))),
        Node(activation, "act2", ["p"], ["a2"]),
        Node("Conv", "conv2", ["a2", "w2"], ["c2"], ConvAttrs()),
        Node("Relu", "relu", ["c2"], ["r"]),
        Node("Flatten", "flatten", ["r"], ["f"], FlattenAttrs()),
        Node("Gemm", "dense", ["f", "d"], ["g"], GemmAttrs(trans_b=True)),
        Node(activation, "act3", ["g"], ["y"]),
    ]
    weights = {"w": rand(rng, 4, 3, 3, 3), "w2": rand(rng, 5, 4, 1, 1), "d": rand(rng, 6, 5 * 3 * 3)}
    return Graph([TensorSpec("x", "float32", (2, 3, 7, 7))], ["y"], nodes, weights, name="softsign")


def test_a_new_fused_activation_runs_on_the_reference_kernel(device: Backend, test_softsign: str) -> None:
    graph = activation_net(test_softsign)
    model = device.model(graph)
    x = rand(np.random.default_rng(1), 2, 3, 7, 7)
    kernels = {step.node.op: step.kernel.name for step in model.plan_for({"x": x}).steps}
    for op in ("FusedConv", "FusedMaxPool", "FusedGemm"):
        assert op in kernels, f"the passes fused no {op}: {kernels}"
    declined = [
        (step.node.op, step.kernel.name)
        for step in model.plan_for({"x": x}).steps
        if getattr(step.node.attrs, "activation", "none") == "test_softsign"
    ]
    assert len(declined) == 3 and all(kernel == "reference" for _, kernel in declined), declined
    relu_conv = [
        s for s in model.plan_for({"x": x}).steps if getattr(s.node.attrs, "activation", "") == "relu"
    ]
    assert [s.kernel.name.startswith(f"{device.kind}_") for s in relu_conv] == [True], kernels
    reference = Model(graph, RuntimeOptions.resolve(threads=1, device="reference"))
    assert_matches(model(x), reference(x), magnitude=30.0)
