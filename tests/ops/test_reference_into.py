"""Every op that declares ``reference_into`` writes its reference's results, bit for bit, into a
given buffer and (where it declares ``in_place``) over its own input, on random shapes; the
``slabs`` trait finds contiguous slabs only where every dimension before the axis is 1."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgecnn.ir.dtypes import dtype_name
from edgecnn.ir.graph import Node, TensorType
from edgecnn.ops.activation import SoftmaxAttrs
from edgecnn.ops.registry import NoAttrs, get_op, known_ops
from edgecnn.ops.shape import ConcatAttrs, SplitAttrs, TransposeAttrs
from edgecnn.ops.traits import reference_adapter, slab_offsets

Case = tuple[object, list[np.ndarray]]
"""A node's attributes and its input arrays."""

DTYPES = st.sampled_from([np.float32, np.float64, np.int32])
SHAPES = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def array(draw: st.DrawFn, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    seed = draw(st.integers(0, 2**32 - 1))
    values = np.random.default_rng(seed).standard_normal(shape) * 4
    return np.where(values.astype(dtype) == 0, 1, values).astype(dtype)  # no integer division by 0


def broadcast_partner(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``shape``: trailing axes of it, some of them 1."""
    kept = shape[draw(st.integers(0, len(shape) - 1)) :]
    return tuple(1 if draw(st.booleans()) else d for d in kept)


@st.composite
def binary(draw: st.DrawFn) -> Case:
    shape, dtype = draw(SHAPES), draw(DTYPES)
    a, b = array(draw, shape, dtype), array(draw, broadcast_partner(draw, shape), dtype)
    return NoAttrs(), ([b, a] if draw(st.booleans()) else [a, b])


@st.composite
def unary(draw: st.DrawFn) -> Case:
    return NoAttrs(), [array(draw, draw(SHAPES), draw(DTYPES))]


@st.composite
def softmax(draw: st.DrawFn) -> Case:
    x = array(draw, draw(SHAPES), draw(DTYPES))
    return SoftmaxAttrs(draw(st.integers(-x.ndim, x.ndim - 1)), draw(st.booleans())), [x]


@st.composite
def concat(draw: st.DrawFn) -> Case:
    shape, dtype = draw(SHAPES), draw(DTYPES)
    axis = draw(st.integers(0, len(shape) - 1))
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    xs = [array(draw, (*shape[:axis], n, *shape[axis + 1 :]), dtype) for n in sizes]
    return ConcatAttrs(axis - len(shape) if draw(st.booleans()) else axis), xs


@st.composite
def transpose(draw: st.DrawFn) -> Case:
    x = array(draw, draw(SHAPES), draw(DTYPES))
    perm = tuple(draw(st.permutations(range(x.ndim))))
    return TransposeAttrs(() if draw(st.booleans()) else perm), [x]


@st.composite
def split(draw: st.DrawFn) -> Case:
    shape, dtype = draw(SHAPES), draw(DTYPES)
    axis = draw(st.integers(0, len(shape) - 1))
    sizes = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    x = array(draw, (*shape[:axis], sum(sizes), *shape[axis + 1 :]), dtype)
    return SplitAttrs(axis, len(sizes)), [x, np.array(sizes, np.int64)]


CASES: dict[str, Callable[[], st.SearchStrategy[Case]]] = {
    "Add": binary,
    "Sub": binary,
    "Mul": binary,
    "Div": binary,
    "Relu": unary,
    "Softmax": softmax,
    "Concat": concat,
    "Transpose": transpose,
    "Split": split,
}


def typed(a: np.ndarray) -> TensorType:
    return TensorType(dtype_name(a.dtype), tuple(a.shape))


def test_every_op_with_a_write_into_reference_is_covered() -> None:
    assert {name for name in known_ops() if get_op(name).reference_into is not None} == set(CASES)


@pytest.mark.parametrize("op", sorted(CASES))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_write_into_equals_reference(op: str, data: st.DataObject) -> None:
    attrs, inputs = data.draw(CASES[op]())
    expected = get_op(op).run_reference(attrs, inputs)
    node = Node(
        op, "n", [f"i{k}" for k in range(len(inputs))], [f"o{k}" for k in range(len(expected))], attrs
    )
    adapter = reference_adapter(node, [typed(a) for a in inputs], [typed(e) for e in expected])
    if adapter is None:
        assert inputs[0].dtype.kind != "f" and op in ("Div", "Softmax")  # integer quotients truncate
        return
    outs = tuple(np.full_like(e, -7) for e in expected)
    adapter.run_into(outs[0] if len(outs) == 1 else outs, *inputs)
    for got, want in zip(outs, expected):
        np.testing.assert_array_equal(got, want)
    for position in adapter.in_place:  # the output written over that input
        own = [a.copy() for a in inputs]
        adapter.run_into(own[position], *own)
        np.testing.assert_array_equal(own[position], expected[0])


def test_no_write_into_for_unknown_shapes() -> None:
    node = Node("Relu", "r", ["x"], ["y"])
    unknown = TensorType("float32", (1, "n"))
    assert reference_adapter(node, [unknown], [unknown]) is None
    assert (
        reference_adapter(Node("Sigmoid", "s", ["x"], ["y"]), [typed(np.zeros(3))], [typed(np.zeros(3))])
        is None
    )


def test_concat_slabs_only_when_contiguous() -> None:
    parts = [TensorType("float32", (1, 2, 3, 3)), TensorType("float32", (1, 5, 3, 3))]
    node = Node("Concat", "c", ["a", "b"], ["o"], ConcatAttrs(axis=1))
    assert slab_offsets(node, parts, [TensorType("float32", (1, 7, 3, 3))]) == (0, 2 * 9 * 4)
    batched = [TensorType("float32", (2, 2, 3, 3)), TensorType("float32", (2, 5, 3, 3))]
    assert slab_offsets(node, batched, [TensorType("float32", (2, 7, 3, 3))]) == ()


def test_split_slabs_only_when_contiguous() -> None:
    whole = TensorType("float32", (1, 7, 3, 3))
    parts = [TensorType("float32", (1, 2, 3, 3)), TensorType("float32", (1, 5, 3, 3))]
    node = Node("Split", "s", ["x"], ["a", "b"], SplitAttrs(axis=1, num_outputs=2))
    assert slab_offsets(node, [whole], parts) == (0, 2 * 9 * 4)
    batched = [TensorType("float32", (2, 2, 3, 3)), TensorType("float32", (2, 5, 3, 3))]
    assert slab_offsets(node, [TensorType("float32", (2, 7, 3, 3))], batched) == ()
    across_width = Node("Split", "s", ["x"], ["a", "b"], SplitAttrs(axis=3, num_outputs=2))
    narrow = [TensorType("float32", (1, 7, 3, 1)), TensorType("float32", (1, 7, 3, 2))]
    assert slab_offsets(across_width, [whole], narrow) == ()


def test_only_concat_and_split_declare_slabs() -> None:
    declared = {name: get_op(name).slabs for name in known_ops() if get_op(name).slabs is not None}
    assert declared == {"Concat": "inputs", "Split": "outputs"}
