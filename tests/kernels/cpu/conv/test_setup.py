"""conv_setup: memoised geometry, equal to a fresh computation, and safe with unhashable attrs."""

from __future__ import annotations

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.setup import _setup, conv_setup
from edgecnn.ops.conv import ConvAttrs

X = TensorType("float32", (1, 3, 9, 7))
W = TensorType("float32", (4, 3, 3, 3))


def test_memoised_setup_equals_a_fresh_one() -> None:
    node = Node("Conv", "c", ["x", "w"], ["y"], ConvAttrs(pads=(1, 0, 1, 0), strides=(2, 1)))
    first = conv_setup(node, [X, W])
    assert first is not None and first.out == (5, 5)
    assert conv_setup(node, [X, W]) is first  # served from the cache
    assert _setup.__wrapped__(node.attrs, X, W) == first


def test_attrs_in_lists_are_computed_uncached() -> None:
    node = Node("Conv", "c", ["x", "w"], ["y"], ConvAttrs(pads=[1, 1, 1, 1]))  # type: ignore[arg-type]
    setup = conv_setup(node, [X, W])
    assert setup is not None and setup.out == (9, 7) and setup.pads == (1, 1, 1, 1)


def test_other_shapes_get_their_own_setup() -> None:
    node = Node("Conv", "c", ["x", "w"], ["y"], ConvAttrs())
    small = conv_setup(node, [X, W])
    large = conv_setup(node, [TensorType("float32", (2, 3, 16, 16)), W])
    assert small is not None and large is not None
    assert (small.batch, small.out) == (1, (7, 5)) and (large.batch, large.out) == (2, (14, 14))
