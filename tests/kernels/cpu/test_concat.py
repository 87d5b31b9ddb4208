"""Concat and Split (kernels "concat", "split") against the numpy reference: random shapes, axes
and part sizes, float32 and int32, one and two threads. Whether the arena makes them views is
tested in test_concat_views.py."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.model import Model
from edgecnn.ops.shape import ConcatAttrs, SplitAttrs
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import reference_run
from kernels.support import fast_run, tuned


@st.composite
def parts_case(draw: st.DrawFn) -> tuple[list[int], int, list[int]]:
    """A whole's shape, an axis and the part sizes along it."""
    shape = draw(st.lists(st.integers(1, 7), min_size=1, max_size=4))
    axis = draw(st.integers(0, len(shape) - 1))
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    shape[axis] = sum(sizes)
    return shape, axis, sizes


SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(case=parts_case(), integer=st.booleans(), threads=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_concat_matches_reference(
    case: tuple[list[int], int, list[int]], integer: bool, threads: int, seed: int
) -> None:
    shape, axis, sizes = case
    rng = np.random.default_rng(seed)
    xs = []
    for size in sizes:
        part = list(shape)
        part[axis] = size
        x = rng.standard_normal(part).astype(np.float32)
        xs.append((x * 100).astype(np.int32) if integer else x)
    attrs = ConcatAttrs(axis - len(shape) if seed % 2 else axis)
    with tuned(grain=0 if threads == 2 else 1 << 30):
        actual, kernel = fast_run("Concat", attrs, xs, (), threads)
    assert kernel == "concat"
    assert np.array_equal(actual, reference_run("Concat", attrs, xs, ()))


@SETTINGS
@given(case=parts_case(), threads=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_split_matches_reference(case: tuple[list[int], int, list[int]], threads: int, seed: int) -> None:
    shape, axis, sizes = case
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    outputs = [f"y{i}" for i in range(len(sizes))]
    split = np.array(sizes, np.int64)
    graph = Graph(
        [TensorSpec("x", "float32", tuple(shape))],
        outputs,
        [Node("Split", "split", ["x", "sizes"], outputs, SplitAttrs(axis, len(sizes)))],
        {"sizes": split},
    )
    with tuned(grain=0 if threads == 2 else 1 << 30):
        model = Model(graph, RuntimeOptions.resolve(threads=threads, optimize=False))
        (step,) = model.plan_for({"x": x}).steps
        with cpu_threads(threads):
            actual = model.run({"x": x})
    assert step.kernel.name == "split"
    for name, want in zip(outputs, np.split(x, np.cumsum(sizes)[:-1], axis=axis)):
        assert np.array_equal(actual[name], want)
