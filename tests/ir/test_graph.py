"""Graph structure: topological order and the one-error validation of broken graphs."""

import pytest

from edgecnn.errors import GraphError, UnsupportedOperatorError
from edgecnn.ir.graph import Graph, Node, TensorSpec, TensorType
from edgecnn.ops import known_ops
from edgecnn.ops.registry import NoAttrs


def relu(name: str, x: str, y: str) -> Node:
    return Node("Relu", name, [x], [y], NoAttrs())


def chain_graph(nodes: list[Node], outputs: list[str] | None = None) -> Graph:
    return Graph([TensorSpec("x", "float32", ("N", 4))], outputs or ["y"], nodes)


def test_topological_sort_orders_dependencies_and_keeps_file_order_otherwise() -> None:
    graph = chain_graph([relu("c", "b", "y"), relu("a", "x", "a_out"), relu("b", "a_out", "b")])
    assert [n.name for n in graph.topologically_sorted().nodes] == ["a", "b", "c"]
    independent = chain_graph([relu("p", "x", "p"), relu("q", "x", "q")], outputs=["p", "q"])
    assert [n.name for n in independent.topologically_sorted().nodes] == ["p", "q"]


def test_cycle_is_reported_with_the_nodes_on_it() -> None:
    graph = chain_graph([relu("a", "b_out", "a_out"), relu("b", "a_out", "b_out"), relu("c", "x", "y")])
    with pytest.raises(GraphError, match=r"cycle.*a \(Relu\).*b \(Relu\)"):
        graph.verify(known_ops())


def test_verify_lists_every_dangling_input_and_missing_output_at_once() -> None:
    graph = chain_graph([relu("a", "ghost1", "h"), relu("b", "ghost2", "y")], outputs=["y", "nowhere"])
    with pytest.raises(GraphError) as info:
        graph.verify(known_ops())
    message = str(info.value)
    assert "ghost1" in message and "ghost2" in message and "'nowhere'" in message


def test_verify_lists_every_unsupported_operator_with_node_names() -> None:
    graph = chain_graph([Node("Frobnicate", "f1", ["x"], ["h"]), Node("Blur", "b1", ["h"], ["y"])])
    with pytest.raises(UnsupportedOperatorError) as info:
        graph.verify(known_ops())
    assert info.value.unsupported == [("Frobnicate", "f1"), ("Blur", "b1")]
    assert "f1 (Frobnicate)" in str(info.value) and "b1 (Blur)" in str(info.value)


def test_duplicate_producer_is_an_error() -> None:
    graph = chain_graph([relu("a", "x", "y"), relu("b", "x", "y")])
    with pytest.raises(GraphError, match="produced twice"):
        graph.verify(known_ops())


def test_tensor_type_properties() -> None:
    assert TensorType("float32", (1, 3, 8, 8)).is_concrete
    assert not TensorType("float32", ("N", 3)).is_concrete
    assert TensorType("float32", None).rank is None
    assert str(TensorType("int64", (None, 2))) == "int64[?, 2]"
