"""An activation op defined only here, with a FusableActivation at its register_op, is fused into
convolutions, dense layers and pools by the unchanged passes, and the fused reference applies it."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops import registry
from edgecnn.ops.common import same_as_first
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.fused import FusedActivation, FusedConvAttrs, activation_names
from edgecnn.ops.pool import MaxPoolAttrs
from edgecnn.ops.registry import FusableActivation, NoAttrs, get_op, register_op
from edgecnn.ops.traits import broadcast_per_image
from edgecnn.passes.fuse_activation import fuse_activation


def softsign(attrs: NoAttrs, x: np.ndarray) -> np.ndarray:
    return np.asarray(x / (1 + np.abs(x)), dtype=x.dtype)


@pytest.fixture
def test_softsign() -> Iterator[str]:
    """Registers TestSoftsign (fusable as "test_softsign", the next code) for one test."""
    code = len(activation_names())
    register_op(
        "TestSoftsign",
        infer=same_as_first,
        per_sample=broadcast_per_image,
        activations=[FusableActivation("test_softsign", code)],
    )(softsign)
    try:
        yield "TestSoftsign"
    finally:
        del registry._REGISTRY["TestSoftsign"]


def test_a_new_activation_fuses_into_a_conv_and_its_reference_applies_it(test_softsign: str) -> None:
    import edgecnn.ops.fused as fused_module

    assert fused_module.ACTIVATIONS[-1] == "test_softsign"  # read from the registry when asked
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    graph = Graph(
        [TensorSpec("x", "float32", (1, 3, 6, 6))],
        ["y"],
        [Node("Conv", "conv", ["x", "w"], ["c"], ConvAttrs()), Node(test_softsign, "act", ["c"], ["y"])],
        {"w": w},
    )
    result = fuse_activation(graph)
    (node,) = result.graph.nodes
    assert node.op == "FusedConv" and node.outputs == ["y"]
    assert isinstance(node.attrs, FusedConvAttrs) and node.attrs.activation == "test_softsign"

    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    expected = softsign(NoAttrs(), get_op("Conv").reference(ConvAttrs(), x, w))
    (actual,) = get_op("FusedConv").run_reference(node.attrs, [x, w])
    np.testing.assert_array_equal(actual, expected)


def test_a_new_activation_fuses_into_a_pool(test_softsign: str) -> None:
    attrs = MaxPoolAttrs(kernel_shape=(2, 2))
    graph = Graph(
        [TensorSpec("x", "float32", (1, 3, 6, 6))],
        ["y"],
        [Node("MaxPool", "pool", ["x"], ["p"], attrs), Node(test_softsign, "act", ["p"], ["y"])],
        {},
    )
    (node,) = fuse_activation(graph).graph.nodes
    assert node.op == "FusedMaxPool" and node.attrs.activation == "test_softsign"
    y = np.linspace(-3, 3, 7, dtype=np.float32)
    np.testing.assert_array_equal(FusedActivation("test_softsign").apply(y), softsign(NoAttrs(), y))


def test_the_activation_is_gone_with_its_op() -> None:
    assert "test_softsign" not in activation_names()
    with pytest.raises(ValueError, match="unknown fused activation"):
        FusedActivation("test_softsign")
