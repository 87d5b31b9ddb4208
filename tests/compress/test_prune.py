"""Magnitude pruning and the choice of weight layers."""

from __future__ import annotations

import numpy as np
import pytest
from compress_helpers import net
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from edgecnn.compress import density, magnitude_mask, prune, weight_layers
from edgecnn.errors import InputError
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.conv import ConvTransposeAttrs
from edgecnn.ops.registry import NoAttrs


def test_weight_layers_and_their_output_axes() -> None:
    found = [(w.node, w.op, w.tensor, w.out_axis) for w in weight_layers(net())]
    assert found == [
        ("conv", "Conv", "conv.w", 0),
        ("fc1", "Gemm", "fc1.w", 0),
        ("mm", "MatMul", "mm.w", 1),
        ("fc2", "Gemm", "fc2.w", 1),
    ]


def test_conv_transpose_shared_and_integer_weights() -> None:
    w = np.ones((4, 3, 2, 2), np.float32)
    attrs = ConvTransposeAttrs(kernel_shape=(2, 2))
    nodes = [
        Node("ConvTranspose", "up", ["x", "w"], ["a"], attrs),
        Node("ConvTranspose", "up2", ["x", "w"], ["b"], attrs),  # the same tensor: listed once
        Node("MatMul", "idx", ["k", "x"], ["c"], NoAttrs()),  # an int64 constant is no weight
    ]
    graph = Graph(
        [TensorSpec("x", "float32", None)], ["a", "b", "c"], nodes, {"w": w, "k": np.ones((2, 2), np.int64)}
    )
    assert [(w.node, w.tensor, w.out_axis) for w in weight_layers(graph)] == [("up", "w", 1)]


@settings(max_examples=80, deadline=None)
@given(
    w=hnp.arrays(
        np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=9), elements=st.floats(-4, 4, width=32)
    ),
    keep=st.floats(0, 1),
)
def test_magnitude_mask_keeps_exactly_the_largest(w: np.ndarray, keep: float) -> None:
    mask = magnitude_mask(w, keep)
    kept = round(keep * w.size)
    assert mask.shape == w.shape and mask.sum() == kept
    if 0 < kept < w.size:  # every kept |w| >= every dropped |w| (ties may go either way)
        assert np.abs(w[mask]).min() >= np.abs(w[~mask]).max()


def test_magnitude_mask_edges() -> None:
    w = np.array([3.0, -5.0, 0.5, np.nan, -0.1], np.float32)
    assert magnitude_mask(w, 0.4).tolist() == [False, True, False, True, False]  # NaN counts as largest
    assert not magnitude_mask(w, 0.0).any() and magnitude_mask(w, 1.0).all()
    assert magnitude_mask(np.zeros((0, 3)), 0.5).shape == (0, 3)


def test_prune_every_layer_leaves_biases_and_the_input_graph_alone() -> None:
    graph = net()
    before = {k: v.copy() for k, v in graph.initializers.items()}
    pruned = prune(graph, 0.25)
    for name, value in before.items():
        assert np.array_equal(graph.initializers[name], value)  # not modified in place
    for layer in weight_layers(graph):
        w, p = before[layer.tensor], pruned.initializers[layer.tensor]
        assert p.dtype == w.dtype and np.count_nonzero(p) == round(0.25 * w.size)
        assert np.array_equal(p[p != 0], w[p != 0])  # kept weights are unchanged
    assert np.array_equal(pruned.initializers["conv.b"], before["conv.b"])


def test_per_layer_overrides_by_node_or_tensor_name() -> None:
    pruned = prune(net(), None, {"fc1": 0.1, "mm.w": 0.5})
    assert density(pruned.initializers["fc1.w"]) == pytest.approx(24 / 240)
    assert density(pruned.initializers["mm.w"]) == pytest.approx(35 / 70)
    assert density(pruned.initializers["conv.w"]) == 1.0  # no default: untouched
    mixed = prune(net(), 0.5, {"conv": 1.0})
    assert density(mixed.initializers["conv.w"]) == 1.0
    assert np.count_nonzero(mixed.initializers["fc2.w"]) == round(0.5 * 21)


@pytest.mark.parametrize(
    ("keep", "layers", "message"),
    [
        (1.5, None, "must be a number in 0..1"),
        (-0.1, None, "must be a number in 0..1"),
        (None, {"fc9": 0.5}, r"no prunable layer named 'fc9'.*prunable layers: conv, fc1, mm, fc2"),
        (None, {"conv.b": 0.5}, "no prunable layer named 'conv.b'"),
        (None, {"fc1": True}, "must be a number"),
    ],
)
def test_bad_prune_arguments(keep: float | None, layers: dict | None, message: str) -> None:
    with pytest.raises(InputError, match=message):
        prune(net(), keep, layers)
