"""Repeated runs of a cached plan: the same results as a run without an arena, fresh result arrays
every call, the checks skipped only where the cache key fully decides what they would have said,
and nothing built after the first run of a shape."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgecnn.bench.zoo import build_model
from edgecnn.errors import InputError
from edgecnn.importers import load_graph
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.kernels.cpu.system import threads
from edgecnn.model import Model
from edgecnn.ops.activation import LeakyReluAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import assert_close, run_without_arena


@pytest.fixture(scope="module")
def lenet(tmp_path_factory: pytest.TempPathFactory) -> Model:
    path = tmp_path_factory.mktemp("zoo") / "lenet5.onnx"
    onnx.save(build_model("lenet5"), str(path))
    return Model(load_graph(path), RuntimeOptions.resolve(threads=2, batch_parallel="never"))


def relu_chain(shape: tuple[object, ...] = ("N", 5)) -> Model:
    graph = Graph(
        inputs=[TensorSpec("x", "float32", shape)],
        outputs=["y", "h"],
        nodes=[
            Node("Relu", "relu", ["x"], ["h"], NoAttrs()),
            Node("LeakyRelu", "leaky", ["h"], ["y"], LeakyReluAttrs(0.5)),
        ],
    )
    return Model(graph, RuntimeOptions.resolve(threads=1))


@pytest.mark.parametrize("batch", [1, 3])
def test_fast_run_equals_the_plain_executor(lenet: Model, batch: int) -> None:
    x = np.random.default_rng(batch).standard_normal((batch, 1, 28, 28)).astype(np.float32)
    name, out = lenet.inputs[0].name, lenet.graph.outputs[0]
    expected = run_without_arena(lenet.plan_for(x), {name: x})[out]
    first = lenet(x)
    assert len(lenet._plans) >= 1
    for got in (lenet(x), lenet.run(x)[out], lenet.run({name: x})[out], first):
        assert_close(got, expected)


def test_every_call_returns_fresh_arrays(lenet: Model) -> None:
    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal((1, 1, 28, 28)).astype(np.float32) for _ in range(2))
    lenet(a)
    first = lenet(a)
    kept = first.copy()
    second = lenet(b)
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, kept)  # the second call did not write into the first's result
    first[...] = 0
    np.testing.assert_array_equal(lenet(a), kept)


def test_results_that_are_intermediates_or_inputs_are_copies() -> None:
    model = relu_chain()
    x = np.array([[-2.0, -1.0, 0.0, 1.0, 2.0]], np.float32)
    model(x)
    y, h = model(x)
    np.testing.assert_array_equal(h, np.maximum(x, 0))
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert not np.shares_memory(y, h) and not np.shares_memory(h, x)
    identity = Model(Graph([TensorSpec("x", "float32", (2,))], ["x"], []))
    v = np.ones(2, np.float32)
    identity(v)
    out = identity(v)
    out[0] = 5
    assert v[0] == 1


def test_new_shapes_and_other_array_types_take_the_checked_path() -> None:
    model = relu_chain()
    model(np.zeros((1, 5), np.float32))
    model(np.zeros((4, 5), np.float32))
    assert {key[2][0][0] for key in model._plans} == {(1, 5), (4, 5)}
    with pytest.raises(InputError, match="expected dtype float32"):
        model(np.zeros((1, 5), np.float64))  # same shape, other dtype: checked, refused
    with pytest.raises(InputError, match="expected shape"):
        model(np.zeros((1, 6), np.float32))
    y, _ = model([[1.0, -1.0, 2.0, -2.0, 0.0]])  # a list: converted by the checked path
    np.testing.assert_array_equal(y, [[1.0, 0.0, 2.0, 0.0, 0.0]])
    with pytest.raises(InputError, match="unknown input name"):
        model.run({"z": np.zeros((1, 5), np.float32)})
    assert len(model._plans) == 2


def test_the_thread_budget_is_restored_after_a_fast_run(lenet: Model) -> None:
    x = np.zeros((1, 1, 28, 28), np.float32)
    lenet(x)
    before = (threads.current_threads(), threads.blas_threads())
    lenet(x)
    assert (threads.current_threads(), threads.blas_threads()) == before


def test_requested_intermediates_match_a_run_without_arena(lenet: Model) -> None:
    x = np.random.default_rng(3).standard_normal((2, 1, 28, 28)).astype(np.float32)
    steps = lenet.plan_for(x).steps
    wanted = [step.node.outputs[0] for step in steps[:3]] + list(lenet.graph.outputs)
    name = lenet.inputs[0].name
    expected = run_without_arena(lenet.plan_for(x, outputs=wanted), {name: x})
    got = lenet.run(x, outputs=wanted)
    assert list(got) == wanted
    for key in wanted:
        assert_close(got[key], expected[key])


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 9),
    columns=st.integers(1, 70),
    depth=st.integers(1, 300),
    addend=st.booleans(),
    kind=st.sampled_from([0, 1, 2]),
)
def test_dense_serial_twin_equals_the_parallel_kernel(
    rows: int, columns: int, depth: int, addend: bool, kind: int
) -> None:
    """Small FC layers run dense_gemm_serial (no parallel region): same tiles, same sums."""
    from edgecnn.kernels.cpu.gemm.dense_tiles import dense_gemm, dense_gemm_serial

    rng = np.random.default_rng(rows * 1000 + columns + depth)
    a = rng.standard_normal((rows, depth)).astype(np.float32)
    w = rng.standard_normal((columns, depth)).astype(np.float32)
    c = rng.standard_normal((rows, columns)).astype(np.float32) if addend else np.zeros((1, 1), np.float32)
    serial, parallel = (np.empty((rows, columns), np.float32) for _ in range(2))
    step = max(1, columns // 3)
    with threads.cpu_threads(2):
        dense_gemm_serial(a, w, c, addend, kind, 0.1, 0.0, 0.0, 4, step, 1, serial)
        dense_gemm(a, w, c, addend, kind, 0.1, 0.0, 0.0, 4, step, 2, parallel)
    np.testing.assert_array_equal(serial, parallel)
    expected = a.astype(np.float64) @ w.T.astype(np.float64) + (c if addend else 0)
    if kind == 1:
        expected = np.maximum(expected, 0)
    elif kind == 2:
        expected = np.where(expected >= 0, expected, 0.1 * expected)
    np.testing.assert_allclose(serial, expected, rtol=1e-4, atol=1e-4 * np.sqrt(depth))


def test_blas_count_set_between_runs_is_what_the_next_run_restores(lenet: Model) -> None:
    x = np.zeros((1, 1, 28, 28), np.float32)
    before = threads.blas_threads()
    try:
        for wanted in (2, 1, 2):
            threads.set_blas_threads(wanted)  # the user's choice between two runs
            lenet(x)
            assert threads.blas_threads() == wanted
    finally:
        threads.set_blas_threads(before)


def test_a_second_run_builds_nothing_and_allocates_only_its_results(
    lenet: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first run of a shape, later runs reuse its plan, arena and prepared actions: no
    plan, memory plan or arena is created, and the only memory left allocated is the result."""
    import tracemalloc

    from edgecnn.runtime import arena, plan

    x = np.random.default_rng(5).standard_normal((1, 1, 28, 28)).astype(np.float32)
    lenet(x)
    built: list[str] = []
    for module, name in (
        (plan, "build_program"),
        (plan, "plan_program"),
        (arena, "MemoryPlan"),
        (arena, "Arena"),
    ):
        original = getattr(module, name)

        def counting(
            *args: object, _original: object = original, _name: str = name, **kwargs: object
        ) -> object:
            built.append(_name)
            return _original(*args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(module, name, counting)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        y = lenet(x)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert built == []
    # what stays allocated is the returned array (plus a few small Python objects)
    assert after - before <= y.nbytes + 2048
