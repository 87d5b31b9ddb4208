"""Before/after tests of fuse_int8_residual: QLinearConv -> QLinearAdd(shortcut) becomes one
QLinearConvAdd that gives the same outputs (either operand order, with the Add's ReLU clamp, the
later convolution where both operands are convolutions); every pattern that does not qualify is
left alone."""

from __future__ import annotations

import numpy as np
import pytest

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.pool import MaxPoolAttrs
from edgecnn.ops.quant import QLinearAddAttrs
from edgecnn.passes.fuse_int8_residual import fuse_int8_residual
from edgecnn.runtime.options import RuntimeOptions

PAD = ConvAttrs(pads=(1, 1, 1, 1))
POOL = MaxPoolAttrs(kernel_shape=(2, 2))
SHAPE = (1, 6, 7, 9)


def constants() -> dict[str, np.ndarray]:
    """Weights w (6 -> 6, 3x3), wd (6 -> 6, 1x1), bias, and the (scale, zero point) pairs x, y, s, o."""
    rng = np.random.default_rng(0)
    found: dict[str, np.ndarray] = {
        "w": rng.integers(-128, 128, (6, 6, 3, 3)).astype(np.int8),
        "wd": rng.integers(-128, 128, (6, 6, 1, 1)).astype(np.int8),
        "ws": np.full(6, 0.004, np.float32),
        "wz": np.zeros(6, np.int8),
        "b": rng.integers(-900, 900, 6).astype(np.int32),
        "big": rng.integers(0, 256, (1, 6, 1, 1)).astype(np.uint8),
    }
    for name, (scale, zero) in {"x": (0.05, 100), "y": (0.07, 128), "s": (0.06, 90), "o": (0.09, 60)}.items():
        found[f"{name}_s"], found[f"{name}_z"] = np.array(scale, np.float32), np.array(zero, np.uint8)
    return found


def conv(name: str, x: str, y: str, weights: str = "w", attrs: ConvAttrs = PAD) -> Node:
    return Node("QLinearConv", name, [x, "x_s", "x_z", weights, "ws", "wz", "y_s", "y_z", "b"], [y], attrs)


def add(a: str, b: str, y: str = "out", relu: bool = False, a_params: str = "y", b_params: str = "s") -> Node:
    inputs = [a, f"{a_params}_s", f"{a_params}_z", b, f"{b_params}_s", f"{b_params}_z", "o_s", "o_z"]
    return Node("QLinearAdd", "add", inputs, [y], QLinearAddAttrs("relu" if relu else "none"))


def graph(nodes: list[Node], outputs: list[str] | None = None) -> Graph:
    """x and the shortcut s, both uint8 (1, 6, 7, 9), and ``nodes``."""
    spec = [TensorSpec("x", "uint8", SHAPE), TensorSpec("s", "uint8", SHAPE)]
    return Graph(spec, outputs or ["out"], nodes, constants())


def same_outputs(before: Graph, after: Graph) -> None:
    """Both graphs' outputs equal on random codes (each as planned, without further passes)."""
    rng = np.random.default_rng(5)
    feeds = {name: rng.integers(0, 256, SHAPE).astype(np.uint8) for name in ("x", "s")}
    options = RuntimeOptions.resolve(device="cpu", optimize=False)
    want, got = Model(before, options).run(feeds), Model(after, options).run(feeds)
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("conv_first", [True, False])
@pytest.mark.parametrize("relu", [False, True])
def test_conv_then_add_is_fused_in_either_order(conv_first: bool, relu: bool) -> None:
    pair = ("c", "s") if conv_first else ("s", "c")
    params = ("y", "s") if conv_first else ("s", "y")
    before = graph([conv("conv", "x", "c"), add(*pair, relu=relu, a_params=params[0], b_params=params[1])])
    result = fuse_int8_residual(before)
    (node,) = result.graph.nodes
    assert node.op == "QLinearConvAdd" and node.outputs == ["out"] and len(result.changes) == 1
    assert node.attrs.conv_first == conv_first and node.attrs.relu == relu and node.attrs.pads == PAD.pads
    assert node.inputs[9:12] == ["s", "s_s", "s_z"] and node.inputs[12:] == ["y_s", "y_z", "o_s", "o_z"]
    same_outputs(before, result.graph)


def test_downsampling_block_fuses_the_later_convolution() -> None:
    """Both operands are convolutions (a 1x1 projection of the shortcut first): the later one is
    fused, so that the other's output exists before the fused node runs."""
    nodes = [
        conv("proj", "s", "p", "wd", ConvAttrs()),
        conv("conv", "x", "c"),
        add("p", "c", a_params="s", b_params="y"),
    ]
    before = graph(nodes)
    after = fuse_int8_residual(before).graph
    assert [n.op for n in after.nodes] == ["QLinearConv", "QLinearConvAdd"]
    assert after.nodes[1].name == "conv" and not after.nodes[1].attrs.conv_first
    same_outputs(before, after)


@pytest.mark.parametrize(
    ("nodes", "outputs"),
    [
        # the convolution's output is read by another node too
        ([conv("conv", "x", "c"), add("c", "s"), Node("MaxPool", "pool", ["c"], ["m"], POOL)], ["out", "m"]),
        # ... or is a graph output
        ([conv("conv", "x", "c"), add("c", "s")], ["out", "c"]),
        # a broadcast shortcut (the compiled Add takes none)
        ([conv("conv", "x", "c"), add("c", "big")], None),
    ],
    ids=["second-reader", "graph-output", "broadcast"],
)
def test_what_does_not_qualify_is_left_alone(nodes: list[Node], outputs: list[str] | None) -> None:
    before = graph(nodes, outputs)
    result = fuse_int8_residual(before)
    assert [n.op for n in result.graph.nodes] == [n.op for n in before.nodes] and not result.changes
