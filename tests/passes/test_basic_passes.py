"""Before/after tests of the shape-independent passes: outputs unchanged, graph smaller."""

import numpy as np

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.activation import LeakyReluAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.passes import PIPELINE, optimize
from edgecnn.passes.eliminate_dead import eliminate_dead
from edgecnn.passes.fold_constants import fold_constants
from edgecnn.runtime.options import RuntimeOptions


def graph_with_constant_branch_and_dead_node() -> Graph:
    return Graph(
        inputs=[TensorSpec("x", "float32", ("N", 3))],
        outputs=["y"],
        initializers={"c": np.array([-1.0, 2.0, -3.0], np.float32)},
        nodes=[
            Node("Relu", "const_relu", ["c"], ["rc"], NoAttrs()),  # constant subgraph
            Node("LeakyRelu", "act", ["x"], ["h"], LeakyReluAttrs(0.5)),
            Node("Relu", "unused", ["h"], ["dead"], NoAttrs()),  # nothing reads 'dead'
            Node("LeakyRelu", "mix", ["h"], ["y"], LeakyReluAttrs(0.1)),
        ],
    )


def test_fold_constants_turns_constant_nodes_into_initializers() -> None:
    result = fold_constants(graph_with_constant_branch_and_dead_node())
    assert [n.name for n in result.graph.nodes] == ["act", "unused", "mix"]
    np.testing.assert_array_equal(result.graph.initializers["rc"], [0.0, 2.0, 0.0])
    assert result.changes == ["folded const_relu (Relu)"]


def test_eliminate_dead_removes_unread_nodes_and_initializers() -> None:
    result = eliminate_dead(graph_with_constant_branch_and_dead_node())
    assert [n.name for n in result.graph.nodes] == ["act", "mix"]
    assert "c" not in result.graph.initializers
    assert "removed unused unused (Relu)" in result.changes


def test_pipeline_keeps_outputs_and_intermediates_stay_inspectable() -> None:
    graph = graph_with_constant_branch_and_dead_node()
    optimized, reports = optimize(graph.topologically_sorted())
    assert [n.name for n in optimized.nodes] == ["act", "mix"]
    assert [r.name for r in reports] == [name for name, _ in PIPELINE]
    x = np.array([[-2.0, 1.0, 4.0]], np.float32)
    fast = Model(graph)
    plain = Model(graph, RuntimeOptions.resolve(optimize=False))
    np.testing.assert_array_equal(fast(x), plain(x))
    assert len(fast.plan_for(x).steps) == 2
    # 'dead' was removed by the optimiser, yet it can still be requested for debugging
    np.testing.assert_array_equal(fast.run(x, outputs=["dead"])["dead"], [[0.0, 1.0, 4.0]])
