"""The write-into forms of reference kernels give the reference's results, bit for bit, into a
given buffer and (where they declare it) into their own input."""

from __future__ import annotations

import numpy as np
import pytest

from edgecnn.ir.dtypes import dtype_name
from edgecnn.ir.graph import Node, TensorType
from edgecnn.ops.activation import SoftmaxAttrs
from edgecnn.ops.registry import NoAttrs, get_op
from edgecnn.ops.shape import ConcatAttrs, SplitAttrs, TransposeAttrs
from edgecnn.runtime.reference_into import concat_slabs, reference_adapter, split_slabs

rng = np.random.default_rng(0)
x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
y = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
bias = rng.standard_normal((3, 1, 1)).astype(np.float32)

CASES = [
    ("Add", NoAttrs(), [x, bias], 1),
    ("Sub", NoAttrs(), [x, y], 1),
    ("Mul", NoAttrs(), [bias, x], 1),
    ("Div", NoAttrs(), [x, y], 1),
    ("Relu", NoAttrs(), [x], 1),
    ("Softmax", SoftmaxAttrs(axis=1), [x], 1),
    ("Softmax", SoftmaxAttrs(axis=1, coerce_2d=True), [x], 1),
    ("Concat", ConcatAttrs(axis=1), [x, y, x], 1),
    ("Transpose", TransposeAttrs((0, 2, 3, 1)), [x], 1),
    ("Split", SplitAttrs(axis=3, num_outputs=2), [x], 2),
]


def typed(a: np.ndarray) -> TensorType:
    return TensorType(dtype_name(a.dtype), tuple(a.shape))


@pytest.mark.parametrize(("op", "attrs", "inputs", "outputs"), CASES, ids=[c[0] for c in CASES])
def test_adapter_equals_reference(op: str, attrs: object, inputs: list[np.ndarray], outputs: int) -> None:
    expected = get_op(op).run_reference(attrs, inputs)
    node = Node(op, "n", [f"i{k}" for k in range(len(inputs))], [f"o{k}" for k in range(outputs)], attrs)
    adapter = reference_adapter(node, [typed(a) for a in inputs], [typed(e) for e in expected])
    assert adapter is not None
    outs = tuple(np.full_like(e, np.nan) for e in expected)
    adapter.run_into(outs[0] if outputs == 1 else outs, *inputs)
    for got, want in zip(outs, expected):
        np.testing.assert_array_equal(got, want)
    for position in adapter.in_place:  # the output written over that input
        own = [a.copy() for a in inputs]
        adapter.run_into(own[position], *own)
        np.testing.assert_array_equal(own[position], expected[0])


def test_concat_slabs_only_when_contiguous() -> None:
    a, b = np.zeros((1, 2, 3, 3), np.float32), np.zeros((1, 5, 3, 3), np.float32)
    out = TensorType("float32", (1, 7, 3, 3))
    node = Node("Concat", "c", ["a", "b"], ["o"], ConcatAttrs(axis=1))
    assert concat_slabs(node, [typed(a), typed(b)], [out]) == (0, 2 * 9 * 4)
    batched = [TensorType("float32", (2, 2, 3, 3)), TensorType("float32", (2, 5, 3, 3))]
    assert concat_slabs(node, batched, [TensorType("float32", (2, 7, 3, 3))]) == ()


def test_split_slabs_only_when_contiguous() -> None:
    whole = TensorType("float32", (1, 7, 3, 3))
    parts = [TensorType("float32", (1, 2, 3, 3)), TensorType("float32", (1, 5, 3, 3))]
    node = Node("Split", "s", ["x"], ["a", "b"], SplitAttrs(axis=1, num_outputs=2))
    assert split_slabs(node, [whole], parts) == (0, 2 * 9 * 4)
    batched = [TensorType("float32", (2, 2, 3, 3)), TensorType("float32", (2, 5, 3, 3))]
    assert split_slabs(node, [TensorType("float32", (2, 7, 3, 3))], batched) == ()
    across_width = Node("Split", "s", ["x"], ["a", "b"], SplitAttrs(axis=3, num_outputs=2))
    narrow = [TensorType("float32", (1, 7, 3, 1)), TensorType("float32", (1, 7, 3, 2))]
    assert split_slabs(across_width, [whole], narrow) == ()
