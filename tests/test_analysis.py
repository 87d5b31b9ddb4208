"""Static analysis behind `edgecnn info`: MACs per op checked against hand counts."""

from __future__ import annotations

import numpy as np
import pytest

from edgecnn.analysis import analyze
from edgecnn.ir.graph import Graph, Node, TensorSpec, TensorType
from edgecnn.model import Model
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.quant import Int8GemmAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.traits import layer_macs


def t(*shape: int) -> TensorType:
    return TensorType("float32", shape)


@pytest.mark.parametrize(
    ("op", "attrs", "inputs", "output", "macs"),
    [
        # grouped conv: 8 outputs channels x 5x5 positions, each (4 / 2 groups) x 3x3 products
        ("Conv", ConvAttrs(group=2), [t(1, 4, 7, 7), t(8, 2, 3, 3)], t(1, 8, 5, 5), 8 * 25 * 2 * 9),
        # transposed conv: every input element scatters into C_out x 3x3 outputs
        ("ConvTranspose", NoAttrs(), [t(1, 4, 5, 5), t(4, 6, 3, 3)], t(1, 6, 7, 7), 4 * 25 * 6 * 9),
        ("Gemm", GemmAttrs(trans_a=True), [t(10, 2), t(10, 3)], t(2, 3), 2 * 3 * 10),
        ("Gemm", GemmAttrs(), [t(2, 10), t(10, 3)], t(2, 3), 2 * 3 * 10),
        ("MatMul", NoAttrs(), [t(4, 2, 10), t(10, 3)], t(4, 2, 3), 4 * 2 * 3 * 10),
        ("Relu", NoAttrs(), [t(3, 3)], t(3, 3), 0),
        # integer ops carry scales and zero points before the weight (input 3)
        ("QLinearConv", ConvAttrs(), [t(1, 4, 7, 7), t(), t(), t(8, 4, 3, 3)], t(1, 8, 5, 5), 8 * 25 * 4 * 9),
        ("Int8Gemm", Int8GemmAttrs(trans_b=True), [t(2, 10), t(), t(), t(3, 10)], t(2, 3), 2 * 3 * 10),
        ("ConvInteger", ConvAttrs(), [t(1, 4, 7, 7), t(8, 4, 3, 3)], t(1, 8, 5, 5), 8 * 25 * 4 * 9),
        ("Conv", ConvAttrs(), [t(1, 4, 7, 7), TensorType("float32", ("C", 4, 3, 3))], None, 0),
    ],
)
def test_layer_macs(op: str, attrs: object, inputs: list[TensorType], output: TensorType, macs: int) -> None:
    assert layer_macs(Node(op, "n", [], [], attrs), inputs, output) == macs  # type: ignore[arg-type]


def test_analyze_counts_params_and_plans_memory() -> None:
    weights = np.ones((8, 3, 3, 3), np.float32)
    graph = Graph(
        inputs=[TensorSpec("x", "float32", (1, 3, 10, 10))],
        outputs=["y"],
        nodes=[
            Node("Conv", "conv", ["x", "w"], ["c"], ConvAttrs()),
            Node("Relu", "relu1", ["c"], ["r"], NoAttrs()),
            Node("Relu", "relu2", ["r"], ["y"], NoAttrs()),
        ],
        initializers={"w": weights},
    )
    model = Model(graph)
    plan = model.plan_for(np.zeros((1, 3, 10, 10), np.float32), optimized=False)
    analysis = analyze(plan, graph.outputs)
    assert [layer.params for layer in analysis.layers] == [weights.size, 0, 0]
    assert analysis.macs == 8 * 8 * 8 * 27
    tensor_bytes = 8 * 8 * 8 * 4
    # c, r and y each 2 KiB: naive holds all three; c is dead once r exists, so y can reuse it
    assert analysis.naive_activation_bytes == 3 * tensor_bytes
    assert analysis.planned_activation_bytes == 2 * tensor_bytes
