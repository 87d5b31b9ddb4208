"""fold_layer_scale: Mul(Add(MatMul(x, W), b), s) -> Add(MatMul(x, W * s), b * s), and the MatMul
-> Mul form, equal to the unfolded graph; left alone where a shape could change, an intermediate is
read elsewhere or a factor is not constant."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import edgecnn
from edgecnn.bench.zoo import model_path
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.passes.fold_layer_scale import fold_layer_scale
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import assert_matches

RNG = np.random.default_rng(0)
WEIGHTS = RNG.standard_normal((6, 5)).astype(np.float32)


def mlp(scale: np.ndarray, bias: np.ndarray | None, outputs: tuple[str, ...] = ("y",)) -> Graph:
    """x (2, 3, 6) @ W (6, 5) [+ b] * s -> y."""
    nodes = [Node("MatMul", "fc", ["x", "w"], ["m"])]
    constants = {"w": WEIGHTS, "s": scale}
    if bias is not None:
        nodes.append(Node("Add", "plus", ["m", "b"], ["a"]))
        constants["b"] = bias
    nodes.append(Node("Mul", "layer_scale", ["s", nodes[-1].outputs[0]], ["y"]))
    return Graph([TensorSpec("x", "float32", (2, 3, 6))], list(outputs), nodes, constants)


def run(graph: Graph) -> dict[str, np.ndarray]:
    x = np.random.default_rng(1).standard_normal((2, 3, 6)).astype(np.float32)
    return Model(graph, RuntimeOptions.resolve(optimize=False)).run({"x": x})


@pytest.mark.parametrize(
    ("scale", "bias"),
    [
        (RNG.standard_normal(5).astype(np.float32), RNG.standard_normal(5).astype(np.float32)),
        (np.array([1e-6], np.float32), np.array(0.5, np.float32)),
        (RNG.standard_normal(5).astype(np.float32), None),
    ],
)
def test_scale_folds_into_the_matmul(scale: np.ndarray, bias: np.ndarray | None) -> None:
    graph = mlp(scale, bias)
    result = fold_layer_scale(graph)
    assert len(result.changes) == 1
    assert [n.op for n in result.graph.nodes] == (["MatMul"] if bias is None else ["MatMul", "Add"])
    assert result.graph.nodes[-1].outputs == ["y"]
    assert_matches(run(result.graph)["y"], run(graph)["y"])
    assert [n.op for n in graph.nodes][-1] == "Mul"  # the input graph is unchanged


def test_left_alone_where_it_would_change_the_graph() -> None:
    columns = RNG.standard_normal(5).astype(np.float32)
    cases = [
        mlp(columns.reshape(1, 5), columns),  # a 2-D scale could broadcast to a higher rank
        mlp(columns, columns.reshape(5, 1)),  # a bias along another axis
        mlp(columns, columns, outputs=("y", "a")),  # the Add's output is also returned
        mlp(columns.astype(np.float64), columns),  # another dtype
        mlp(np.ones(3, np.float32), columns),  # not one value per column
    ]
    for graph in cases:
        assert fold_layer_scale(graph).changes == []
    variable = mlp(columns, columns)
    variable.initializers.pop("s")
    variable.inputs.append(TensorSpec("s", "float32", (5,)))
    assert fold_layer_scale(variable).changes == []


def test_zoo_convnext_keeps_no_layer_scale_mul(tmp_path: Path) -> None:
    """Every ConvNeXt block's layer scale folds: the small zoo variant's plan runs no Mul (the
    zoo test compares its output with onnxruntime's)."""
    path = model_path("convnext-tiny", tmp_path, 0.125, 64)
    model = edgecnn.load(path, threads=1)
    x = np.zeros((1, 3, 64, 64), np.float32)
    ops = Counter(step.node.op for step in model.plan_for({"input": x}).steps)
    assert ops["MatMul"] == 36 and ops["Mul"] == 0
