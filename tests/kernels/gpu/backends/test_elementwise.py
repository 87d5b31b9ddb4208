"""Activations, LRN, softmax, broadcasting arithmetic, shape views, Concat, Split and Transpose on
every GPU-ish backend against the reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgecnn.ops.activation import LeakyReluAttrs, SoftmaxAttrs
from edgecnn.ops.norm import LRNAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import ConcatAttrs, FlattenAttrs, ReshapeAttrs, SplitAttrs, TransposeAttrs
from edgecnn.testing import run_node
from kernels.gpu.backends.support import Backend, one_node_graph, rand

# Row lengths below, at and past OpenCL's 64-item work-group and CUDA's 256-thread block, so that
# both launches (one group / several) run on either backend.
ODD = (1, 3, 7, 13, 67, 131, 255, 257)


@pytest.mark.parametrize("size", ODD)
@pytest.mark.parametrize(
    ("op", "kernel"),
    [("Relu", "relu"), ("Sigmoid", "sigmoid"), ("Tanh", "tanh"), ("HardSwish", "hard_swish"),
     ("LeakyRelu", "leaky_relu")],
)  # fmt: skip
def test_activations(device: Backend, op: str, kernel: str, size: int) -> None:
    x = 5 * rand(np.random.default_rng(size), 2, size)
    x[0, 0] = np.nan
    attrs = LeakyReluAttrs(alpha=0.2) if op == "LeakyRelu" else NoAttrs()
    device.check_node(op, attrs, [x], kernel=kernel)


def test_sigmoid_saturates_without_overflow(device: Backend) -> None:
    x = np.array([[-100.0, -20.0, 0.0, 20.0, 100.0]], np.float32)
    device.check_node("Sigmoid", NoAttrs(), [x], kernel="sigmoid")


@pytest.mark.parametrize(
    ("low", "high", "constant"),
    [(0.0, 6.0, (1, 2)), (-1.0, None, (1,)), (None, 0.5, (2,)), (-0.5, 0.5, ()), (1.0, -1.0, (1, 2)),
     (None, None, ())],
)  # fmt: skip
def test_clip_bounds_constant_runtime_or_absent(
    device: Backend, low: float | None, high: float | None, constant: tuple[int, ...]
) -> None:
    x = 3 * rand(np.random.default_rng(0), 4, 33)
    bounds = [None if v is None else np.array(v, np.float32) for v in (low, high)]
    constant_inputs = [i for i in constant if bounds[i - 1] is not None]
    device.check_node("Clip", NoAttrs(), [x, *bounds], constant_inputs, "clip")


@pytest.mark.parametrize("size", [1, 2, 3, 5])
@pytest.mark.parametrize("shape", [(2, 7, 5, 3), (1, 5), (1, 96, 13, 13)])
def test_lrn(device: Backend, size: int, shape: tuple[int, ...]) -> None:
    x = 4 * rand(np.random.default_rng(size), *shape)
    device.check_node("LRN", LRNAttrs(size=size, alpha=1e-2, beta=0.75, bias=2.0), [x], kernel="lrn")


@pytest.mark.parametrize(
    ("shape", "axis", "coerce"),
    [((2, 1000), -1, False), ((3, 4, 5), 1, False), ((3, 4, 5), 0, False), ((2, 3, 4, 5), 1, True),
     ((7,), 0, False)],
)  # fmt: skip
def test_softmax(device: Backend, shape: tuple[int, ...], axis: int, coerce: bool) -> None:
    x = 10 * rand(np.random.default_rng(1), *shape)
    device.check_node("Softmax", SoftmaxAttrs(axis=axis, coerce_2d=coerce), [x], kernel="softmax")


SHAPES = st.lists(st.integers(1, 5), min_size=0, max_size=4).map(tuple)


def test_binary_broadcasting(device: Backend) -> None:
    """b is a broadcastable version of a's shape: axes dropped on the left, some set to 1."""

    @settings(max_examples=30, deadline=None)
    @given(
        op=st.sampled_from(["Add", "Sub", "Mul", "Div"]),
        shape=SHAPES,
        data=st.data(),
        constant=st.sampled_from([(), (1,), (0,)]),
    )
    def check(op: str, shape: tuple[int, ...], data: st.DataObject, constant: tuple[int, ...]) -> None:
        drop = data.draw(st.integers(0, len(shape)))
        ones = data.draw(st.lists(st.booleans(), min_size=len(shape) - drop, max_size=len(shape) - drop))
        b_shape = tuple(1 if one else d for one, d in zip(ones, shape[drop:]))
        if data.draw(st.booleans()):
            shape, b_shape = b_shape, shape
        rng = np.random.default_rng(len(shape))
        a, b = rand(rng, *shape), rand(rng, *b_shape)
        if op == "Div":
            b = np.where(np.abs(b) < 0.1, 1.0, b).astype(np.float32)
        device.check_node(op, NoAttrs(), [a, b], constant, op.lower())

    check()


def test_integer_arithmetic_stays_on_the_reference(device: Backend) -> None:
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    out, kernel = device.run("Add", NoAttrs(), [a, a])
    assert kernel == "reference" and out.tolist() == (2 * a).tolist()


@pytest.mark.parametrize(
    ("op", "attrs", "extra"),
    [
        ("Flatten", FlattenAttrs(axis=1), []),
        ("Reshape", ReshapeAttrs(), [np.array([0, -1], np.int64)]),
        ("Squeeze", NoAttrs(), [np.array([2], np.int64)]),
        ("Unsqueeze", NoAttrs(), [np.array([0], np.int64)]),
        ("Identity", NoAttrs(), []),
    ],
)
def test_shape_views(device: Backend, op: str, attrs: object, extra: list[np.ndarray]) -> None:
    x = rand(np.random.default_rng(2), 2, 3, 1, 5)
    device.check_node(op, attrs, [x, *extra], list(range(1, 1 + len(extra))), f"{op.lower()}_view")


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(device: Backend, axis: int) -> None:
    rng = np.random.default_rng(3)
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    xs = [rand(rng, *[d + i if a == axis % 3 else d for a, d in enumerate(s)]) for i, s in enumerate(shapes)]
    device.check_node("Concat", ConcatAttrs(axis=axis), xs, kernel="concat")


@pytest.mark.parametrize(
    ("shape", "axis", "sizes", "outputs"),
    [((2, 7, 3), 1, [2, 5], 2), ((6, 4), 0, None, 3), ((2, 3, 5), -1, [1, 1, 3], 3), ((5,), 0, None, 2)],
)
def test_split(
    device: Backend, shape: tuple[int, ...], axis: int, sizes: list[int] | None, outputs: int
) -> None:
    x = rand(np.random.default_rng(4), *shape)
    inputs = [x, None if sizes is None else np.array(sizes, np.int64)]
    attrs = SplitAttrs(axis=axis, num_outputs=outputs)
    graph, feeds = one_node_graph("Split", attrs, inputs, (1,), outputs)
    model = device.model(graph, optimize=False)
    (step,) = model.plan_for(feeds).steps
    assert step.kernel.name == device.kernel("split")
    result = model.run(feeds)
    expected = run_node("Split", attrs, inputs, num_outputs=outputs, constant_inputs=(1,), device="reference")
    for i, e in enumerate(expected):
        np.testing.assert_array_equal(result[f"out{i}"], e)


@pytest.mark.parametrize(
    ("shape", "perm"),
    [((2, 3, 4), (2, 0, 1)), ((2, 3, 2, 5, 4), (0, 2, 1, 3, 4)), ((7, 9), ()), ((5,), (0,))],
)
def test_transpose(device: Backend, shape: tuple[int, ...], perm: tuple[int, ...]) -> None:
    x = rand(np.random.default_rng(5), *shape)
    device.check_node("Transpose", TransposeAttrs(perm=perm), [x], kernel="transpose")
