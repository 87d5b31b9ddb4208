"""An activation op registered in edgecnn.ops that the compiled epilogue does not implement: the passes
still fuse it (FusedConv, FusedConvAdd, FusedGemm, the fused pools), every CPU kernel declines those
steps, the reference kernel runs them and the model computes the right result. And every activation
edgecnn.ops defines has an epilogue code."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.kernels.cpu.gemm.epilogue import ActivationKind, implements_activation
from edgecnn.model import Model
from edgecnn.ops import registry
from edgecnn.ops.common import same_as_first
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import ACTIVATIONS, FusedConvAttrs, FusedGemmAttrs, activation_names
from edgecnn.ops.fused_pool import FusedAveragePoolAttrs
from edgecnn.ops.pool import MaxPoolAttrs
from edgecnn.ops.quant import Int8ConvAttrs
from edgecnn.ops.registry import FusableActivation, NoAttrs, register_op
from edgecnn.ops.shape import FlattenAttrs
from edgecnn.ops.traits import broadcast_per_image
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import assert_matches


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


def test_every_activation_of_edgecnn_ops_has_an_epilogue_code() -> None:
    assert set(ACTIVATIONS) <= {kind.name.lower() for kind in ActivationKind}


def test_the_epilogue_implements_only_its_own_activations(test_softsign: str) -> None:
    assert implements_activation(Node("FusedConv", "c", ["x", "w"], ["y"], FusedConvAttrs(activation="relu")))
    assert implements_activation(Node("Conv", "c", ["x", "w"], ["y"], ConvAttrs()))
    for attrs in (
        FusedConvAttrs(activation="test_softsign"),
        FusedGemmAttrs(activation="test_softsign"),
        FusedAveragePoolAttrs(kernel_shape=(2, 2), activation="test_softsign"),
        Int8ConvAttrs(activation="test_softsign"),
    ):
        assert not implements_activation(Node("FusedConv", "c", ["x", "w"], ["y"], attrs))


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)


def activation_net(activation: str) -> Graph:
    """Conv + ``activation``; MaxPool + ``activation``; Conv + Add(residual) + ``activation``; Conv +
    Relu; Flatten; Gemm + ``activation``: the passes fuse each activation into the layer before it."""
    rng = np.random.default_rng(7)
    nodes = [
        Node("Conv", "conv", ["x", "w"], ["c"], ConvAttrs(pads=(1, 1, 1, 1))),
        Node(activation, "act1", ["c"], ["a1"]),
        Node("MaxPool", "pool", ["a1"], ["p"], MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2))),
        Node(activation, "act2", ["p"], ["a2"]),
        Node("Conv", "conv_res", ["a2", "w1"], ["c1"], ConvAttrs(pads=(1, 1, 1, 1))),
        Node("Add", "add", ["c1", "a2"], ["s"]),
        Node(activation, "act3", ["s"], ["a3"]),
        Node("Conv", "conv2", ["a3", "w2"], ["c2"], ConvAttrs()),
        Node("Relu", "relu", ["c2"], ["r"]),
        Node("Flatten", "flatten", ["r"], ["f"], FlattenAttrs()),
        Node("Gemm", "dense", ["f", "d"], ["g"], GemmAttrs(trans_b=True)),
        Node(activation, "act4", ["g"], ["y"]),
    ]
    weights = {
        "w": rand(rng, 4, 3, 3, 3),
        "w1": rand(rng, 4, 4, 3, 3),
        "w2": rand(rng, 5, 4, 1, 1),
        "d": rand(rng, 6, 5 * 3 * 3),
    }
    return Graph([TensorSpec("x", "float32", (2, 3, 7, 7))], ["y"], nodes, weights, name="softsign")


def test_a_new_fused_activation_runs_on_the_reference_kernel(test_softsign: str) -> None:
    graph = activation_net(test_softsign)
    model = Model(graph, RuntimeOptions.resolve(threads=2, device="cpu"))
    x = rand(np.random.default_rng(1), 2, 3, 7, 7)
    steps = model.plan_for({"x": x}).steps
    kernels = {step.node.op: step.kernel.name for step in steps}
    for op in ("FusedConv", "FusedMaxPool", "FusedConvAdd", "FusedGemm"):
        assert op in kernels, f"the passes fused no {op}: {kernels}"
    declined = [
        (step.node.op, step.kernel.name)
        for step in steps
        if getattr(step.node.attrs, "activation", "none") == "test_softsign"
    ]
    assert len(declined) == 4 and all(kernel == "reference" for _, kernel in declined), declined
    relu_conv = [s for s in steps if getattr(s.node.attrs, "activation", "") == "relu"]
    assert [s.kernel.name != "reference" for s in relu_conv] == [True], kernels
    reference = Model(graph, RuntimeOptions.resolve(threads=1, device="reference"))
    assert_matches(model(x), reference(x), magnitude=30.0)
