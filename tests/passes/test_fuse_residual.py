"""Before/after tests of fuse_residual: conv -> Add(shortcut) [-> activation] becomes one FusedConvAdd
that gives the same outputs; every pattern that does not qualify is left alone."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from typer.testing import CliRunner

from edgecnn.bench.zoo import build_model
from edgecnn.cli.app import app
from edgecnn.importers import load_graph
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.kernels.registry import scoped_registrations
from edgecnn.model import Model
from edgecnn.ops.activation import LeakyReluAttrs
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.fused import FusedConvAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.passes import PIPELINE, optimize
from edgecnn.passes.fuse_residual import fuse_residual
from edgecnn.passes.pipeline import pipeline_without
from edgecnn.runtime.options import RuntimeOptions

PAD = ConvAttrs(pads=(1, 1, 1, 1))


@pytest.fixture(autouse=True)
def residual_kernel() -> Iterator[None]:
    """The CPU kernel registered for these tests (kernels/cpu imports it once the lead adds it)."""
    from edgecnn.kernels.cpu.conv import (
        residual as conv_residual,  # imports (registers) the other kernels first
    )

    with scoped_registrations():
        importlib.reload(conv_residual)  # registers it (again)
        yield


def random(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(np.float32)


def block(
    nodes: list[Node], outputs: list[str] | None = None, extra: dict[str, np.ndarray] | None = None
) -> Graph:
    """x (N, 4, 6, 7) and a 3x3 conv 'w' (4 -> 4, bias 'b') available to ``nodes``."""
    initializers = {"w": random((4, 4, 3, 3), 1), "b": random((4,), 2), **(extra or {})}
    return Graph([TensorSpec("x", "float32", ("N", 4, 6, 7))], outputs or ["y"], nodes, initializers)


def conv(name: str = "conv", x: str = "x", y: str = "c", attrs: object = PAD) -> Node:
    return Node("Conv", name, [x, "w", "b"], [y], attrs)


def add(a: str, b: str, y: str = "s") -> Node:
    return Node("Add", "add", [a, b], [y], NoAttrs())


def relu(x: str = "s", y: str = "y") -> Node:
    return Node("Relu", "relu", [x], [y], NoAttrs())


def assert_same_outputs(before: Graph, after: Graph, batch: int = 2) -> None:
    """Both graphs, run without further passes, give the same outputs (reference = before)."""
    feeds = {"x": random((batch, 4, 6, 7), 7)}
    options = RuntimeOptions.resolve(threads=1, optimize=False)
    expected = Model(before, options).run(feeds)
    got = Model(after, options).run(feeds)
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5, err_msg=name)


def fused_ops(graph: Graph) -> tuple[Graph, list[str]]:
    result = fuse_residual(graph.topologically_sorted())
    result.graph.verify()
    return result.graph, result.changes


# ------------------------------------------------------------------ positive cases
@pytest.mark.parametrize("order", ["conv first", "shortcut first"])
def test_conv_add_relu_becomes_one_step_in_either_operand_order(order: str) -> None:
    operands = ("c", "x") if order == "conv first" else ("x", "c")
    graph = block([conv(), add(*operands), relu()])
    after, changes = fused_ops(graph)
    (node,) = after.nodes
    assert node.op == "FusedConvAdd" and node.name == "conv"
    assert node.inputs == ["x", "w", "b", "x"] and node.outputs == ["y"]
    assert node.attrs == FusedConvAttrs(pads=(1, 1, 1, 1), activation="relu")
    assert changes == ["fused conv (Conv) + add (Add) + relu (Relu) -> FusedConvAdd (relu)"]
    assert_same_outputs(graph, after)


def test_conv_without_bias_keeps_the_bias_slot_empty() -> None:
    graph = block([Node("Conv", "conv", ["x", "w"], ["c"], PAD), add("c", "x", "y")])
    after, _ = fused_ops(graph)
    (node,) = after.nodes
    assert node.inputs == ["x", "w", "", "x"] and node.attrs.activation == "none"
    assert_same_outputs(graph, after)


@pytest.mark.parametrize(
    "activation, expected",
    [
        (Node("LeakyRelu", "act", ["s"], ["y"], LeakyReluAttrs(0.2)), "leaky_relu"),
        (Node("Clip", "act", ["s", "lo", "hi"], ["y"], NoAttrs()), "clip"),
        (Node("Sigmoid", "act", ["s"], ["y"], NoAttrs()), "sigmoid"),
    ],
)
def test_other_activations_are_absorbed(activation: Node, expected: str) -> None:
    bounds = {"lo": np.asarray(0.0, np.float32), "hi": np.asarray(0.5, np.float32)}
    graph = block([conv(), add("c", "x"), activation], extra=bounds)
    after, _ = fused_ops(graph)
    (node,) = after.nodes
    assert node.attrs.activation == expected
    assert_same_outputs(graph, after)


def test_silu_written_as_mul_is_absorbed() -> None:
    graph = block(
        [
            conv(),
            add("c", "x"),
            Node("Sigmoid", "gate", ["s"], ["g"], NoAttrs()),
            Node("Mul", "mul", ["s", "g"], ["y"], NoAttrs()),
        ]
    )
    after, _ = fused_ops(graph)
    (node,) = after.nodes
    assert node.attrs.activation == "silu" and node.outputs == ["y"]
    assert_same_outputs(graph, after)


def test_projection_shortcut_fuses_the_later_conv() -> None:
    """Add(main branch conv, shortcut conv): both qualify; the later one is absorbed."""
    graph = block(
        [
            conv("main", "x", "m"),
            Node("Conv", "shortcut", ["x", "w1"], ["p"], ConvAttrs()),
            add("m", "p"),
            relu(),
        ],
        extra={"w1": random((4, 4, 1, 1), 3)},
    )
    after, _ = fused_ops(graph)
    assert [(n.op, n.name) for n in after.nodes] == [("Conv", "main"), ("FusedConvAdd", "shortcut")]
    assert after.nodes[1].inputs == ["x", "w1", "", "m"]
    assert_same_outputs(graph, after)


def test_two_blocks_in_a_row() -> None:
    first = [conv("c1", "x", "c1"), add("c1", "x", "s1"), relu("s1", "r1")]
    second = [
        Node("Add", "add2", ["r1", "c2"], ["s2"], NoAttrs()),
        Node("Relu", "relu2", ["s2"], ["y"], NoAttrs()),
    ]
    graph = block([*first, conv("c2", "r1", "c2"), *second])
    after, changes = fused_ops(graph)
    assert [n.op for n in after.nodes] == ["FusedConvAdd", "FusedConvAdd"] and len(changes) == 2
    assert after.nodes[1].inputs == ["r1", "w", "b", "r1"]
    assert_same_outputs(graph, after)


def test_a_returned_sum_keeps_its_name_and_its_activation_stays() -> None:
    graph = block([conv(), add("c", "x"), relu()], outputs=["s", "y"])
    after, _ = fused_ops(graph)
    assert [n.op for n in after.nodes] == ["FusedConvAdd", "Relu"]
    assert after.nodes[0].outputs == ["s"] and after.nodes[0].attrs.activation == "none"
    assert_same_outputs(graph, after)


def test_a_sum_read_twice_keeps_its_activation_apart() -> None:
    graph = block([conv(), add("c", "x"), relu(), Node("Neg", "neg", ["s"], ["n"], NoAttrs())], ["y", "n"])
    after, _ = fused_ops(graph)
    assert [n.op for n in after.nodes] == ["FusedConvAdd", "Relu", "Neg"]
    assert after.nodes[0].attrs.activation == "none"
    assert_same_outputs(graph, after)


# ------------------------------------------------------------------ left alone
def assert_unchanged(graph: Graph) -> None:
    after, changes = fused_ops(graph)
    assert changes == []
    assert [(n.op, n.name) for n in after.nodes] == [
        (n.op, n.name) for n in graph.topologically_sorted().nodes
    ]


def test_conv_output_read_twice() -> None:
    assert_unchanged(
        block([conv(), add("c", "x"), relu(), Node("Neg", "neg", ["c"], ["n"], NoAttrs())], ["y", "n"])
    )


def test_conv_output_returned() -> None:
    assert_unchanged(block([conv(), add("c", "x"), relu()], outputs=["y", "c"]))


def test_residual_of_another_shape() -> None:
    """z (N, 4, 1, 1) broadcasts over the conv output: the Add stays."""
    graph = block([conv(), add("c", "z"), relu()])
    graph.inputs.append(TensorSpec("z", "float32", ("N", 4, 1, 1)))
    assert_unchanged(graph)


def test_residual_of_unknown_shape() -> None:
    graph = block([conv(), add("c", "z"), relu()])
    graph.inputs.append(TensorSpec("z", "float32", ("N", 4, None, 7)))
    assert_unchanged(graph)


def test_add_with_a_constant() -> None:
    assert_unchanged(block([conv(), add("c", "k"), relu()], extra={"k": random((1, 4, 6, 7), 4)}))


def test_conv_adding_itself() -> None:
    assert_unchanged(block([conv(), add("c", "c", "y")]))


def test_conv_with_its_own_activation() -> None:
    fused = Node(
        "FusedConv", "conv", ["x", "w", "b"], ["c"], FusedConvAttrs(pads=(1, 1, 1, 1), activation="relu")
    )
    assert_unchanged(block([fused, add("c", "x"), relu()]))


def test_add_of_two_non_conv_tensors() -> None:
    assert_unchanged(block([relu("x", "r"), add("r", "x", "y")]))


# ------------------------------------------------------------------ pipeline and real models
def test_pipeline_runs_it_after_fuse_activation() -> None:
    names = [name for name, _ in PIPELINE]
    assert names.index("fuse_activation") < names.index("fuse_residual") < names.index("eliminate_dead")
    assert [name for name, _ in pipeline_without("fuse_residual")] == [
        n for n in names if n != "fuse_residual"
    ]
    with pytest.raises(ValueError, match="fuse_nothing"):
        pipeline_without("fuse_nothing")


@pytest.mark.parametrize("name, blocks", [("resnet18", 8), ("resnet50", 16)])
def test_resnet_residual_tails_are_fused(name: str, blocks: int, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.onnx"
    onnx.save(build_model(name, width=0.25, resolution=32), str(path))
    graph = load_graph(path)
    optimized, reports = optimize(graph.topologically_sorted())
    ops = [n.op for n in optimized.nodes]
    assert ops.count("FusedConvAdd") == blocks and "Add" not in ops and "Relu" not in ops
    changes = {r.name: r.changes for r in reports}["fuse_residual"]
    assert len(changes) == blocks and all(c.endswith("-> FusedConvAdd (relu)") for c in changes)
    x = random((2, 3, 32, 32), 9)
    fast = Model(graph, RuntimeOptions.resolve(threads=2))
    assert [n.op for n in fast.optimized_graph.nodes] == ops
    assert sum(s.kernel.name == "conv_residual" for s in fast.plan_for(x).steps) == blocks
    if name == "resnet18":  # `edgecnn info --passes` lists the fused blocks
        shown = CliRunner().invoke(app, ["info", str(path), "--passes"])
        assert shown.exit_code == 0, shown.output
        assert f"fuse_residual: {blocks} change(s)" in shown.stdout
        assert "+ add1 (Add) + relu3 (Relu) -> FusedConvAdd (relu)" in shown.stdout
    plain = Model(graph, RuntimeOptions.resolve(threads=1, optimize=False))
    expected = plain(x)
    scale = float(np.abs(expected).max())
    np.testing.assert_allclose(fast(x), expected, rtol=1e-4, atol=1e-4 * scale)


def test_fused_graph_round_trips_through_ecnn_and_keeps_its_macs(tmp_path: Path) -> None:
    """The .ecnn format stores FusedConvAdd (empty bias slot included); `edgecnn info` counts its MACs
    like the conv it replaced; a split batch runs it per slice."""
    from edgecnn.analysis import analyze
    from edgecnn.format import load_ecnn, save_ecnn
    from edgecnn.runtime.batch import batch_separable

    graph = block([Node("Conv", "conv", ["x", "w"], ["c"], PAD), add("x", "c"), relu()])
    fused, _ = fused_ops(graph)
    save_ecnn(fused, tmp_path / "fused.ecnn")
    loaded = load_ecnn(tmp_path / "fused.ecnn")
    (node,) = loaded.nodes
    assert (
        node.op == "FusedConvAdd"
        and node.inputs == ["x", "w", "", "x"]
        and node.attrs == fused.nodes[0].attrs
    )
    assert_same_outputs(graph, loaded)
    x = random((2, 4, 6, 7), 8)
    options = RuntimeOptions.resolve(threads=1, optimize=False)
    before, after = Model(graph, options).plan_for(x), Model(loaded, options).plan_for(x)
    assert analyze(after, ["y"]).macs == analyze(before, ["y"]).macs == 2 * 4 * 6 * 7 * 4 * 9
    assert batch_separable(after, 2)
