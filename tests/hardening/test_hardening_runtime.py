"""Issue 34's runtime cases: options, input dtypes, bounded messages, the plan cache's bounds and
planning time linear in the graph's size."""

from __future__ import annotations

import time

import numpy as np
import pytest

from edgecnn.errors import (
    MAX_MESSAGE_CHARS,
    ConfigurationError,
    GraphError,
    InputError,
    UnsupportedOperatorError,
)
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.registry import NoAttrs
from edgecnn.passes.eliminate_noop import eliminate_noop
from edgecnn.runtime.buffers import StepIO, TensorInfo, plan_buffers
from edgecnn.runtime.options import RuntimeOptions


def chain(length: int, shape: tuple[int | str, ...] = (1, 8)) -> Graph:
    nodes = [Node("Relu", f"r{i}", [f"t{i}"], [f"t{i + 1}"], NoAttrs()) for i in range(length)]
    return Graph(
        inputs=[TensorSpec("t0", "float32", shape)], outputs=[f"t{length}"], nodes=nodes, name="chain"
    )


@pytest.mark.parametrize("threads", [0, -1, "2", 2.0, True])
def test_bad_thread_counts_are_configuration_errors(threads: object) -> None:
    with pytest.raises(ConfigurationError, match="threads must be"):
        RuntimeOptions.resolve(threads=threads)  # type: ignore[arg-type]


def test_memory_limit_from_argument_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert RuntimeOptions.resolve(threads=1, memory_limit="512M").memory_limit == 512 << 20
    assert RuntimeOptions.resolve(threads=1, memory_limit=4096).memory_limit == 4096
    monkeypatch.setenv("EDGECNN_MEMORY_LIMIT", "2G")
    assert RuntimeOptions.resolve(threads=1).memory_limit == 2 << 30
    monkeypatch.setenv("EDGECNN_MEMORY_LIMIT", "lots")
    with pytest.raises(ConfigurationError, match="EDGECNN_MEMORY_LIMIT must be a size"):
        RuntimeOptions.resolve(threads=1)
    for bad in (0, -5, "nan", 1.5):
        with pytest.raises(ConfigurationError, match="memory_limit"):
            RuntimeOptions.resolve(threads=1, memory_limit=bad)  # type: ignore[arg-type]


class Tagged(np.ndarray):
    """An ndarray subclass, as libraries return them."""


def test_big_endian_and_subclassed_inputs_are_converted() -> None:
    model = Model(chain(2), RuntimeOptions.resolve(threads=1))
    native = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)
    expected = model.run(native)["t2"]
    swapped = native.astype(">f4")
    assert not swapped.dtype.isnative
    np.testing.assert_array_equal(model.run(swapped)["t2"], expected)
    np.testing.assert_array_equal(model(swapped), expected)  # the cached-plan path too
    np.testing.assert_array_equal(model.run(native.view(Tagged))["t2"], expected)
    with pytest.raises(InputError, match="masked arrays are not supported"):
        model.run(np.ma.masked_array(native))


def test_error_messages_have_a_bounded_length() -> None:
    assert len(str(GraphError("x" * 10**6))) <= MAX_MESSAGE_CHARS
    names = [("Foo", f"node{i}") for i in range(100_000)]
    message = str(UnsupportedOperatorError(names))
    assert (
        len(message) <= MAX_MESSAGE_CHARS
        and message.startswith("unsupported operator(s) Foo")
        and "characters elided" in message
    )


def test_plan_cache_is_bounded_by_count_and_bytes() -> None:
    model = Model(chain(3, ("n", 8)), RuntimeOptions.resolve(threads=1))
    for batch in range(1, 21):
        model.run(np.ones((batch, 8), np.float32))
    assert len(model._plans) == 8  # the count bound (runtime/plan_cache.MAX_PLANS)
    newest = {key[2][0][0] for key in model._plans}
    assert newest == {(b, 8) for b in range(13, 21)}
    model.clear_cache()
    assert len(model._plans) == 0 and model._plans.nbytes == 0
    # a budget of 64 KiB holds the plans of small batches, but not a dozen of 1 KiB-row batches
    small = Model(chain(3, ("n", 256)), RuntimeOptions.resolve(threads=1, memory_limit=64 << 10))
    for batch in range(1, 13):
        small.run(np.ones((batch, 256), np.float32))
        assert small._plans.nbytes <= 64 << 10
    assert 1 <= len(small._plans) < 8


def _plan_seconds(length: int, in_place: bool) -> float:
    """CPU seconds of the best of three plan_buffers runs over a chain of ``length`` write-into steps."""
    info = TensorInfo("float32", (1, 256), 1024)
    steps = [StepIO((i,), (i + 1,), "into", (0,) if in_place else ()) for i in range(length)]
    tensors = dict.fromkeys(range(length + 1), info)
    best = float("inf")
    for _ in range(3):
        start = time.process_time()  # CPU time: other processes on a shared machine do not count
        plan_buffers(steps, tensors, [0], {length})
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize("in_place", [True, False], ids=["one growing buffer", "a buffer per step"])
def test_buffer_planning_is_linear_in_the_chain_length(in_place: bool) -> None:
    """Four times the steps may cost about four times the time; the quadratic planner (a member
    walk per in-place test, a scan of every placed buffer per placement) took sixteen."""
    short, long = _plan_seconds(1500, in_place), _plan_seconds(6000, in_place)
    assert long < 8 * short, (short, long)


def _noop_pass_seconds(length: int) -> float:
    """CPU seconds of eliminate_noop over a chain of ``length`` Identity nodes (all removed)."""
    nodes = [Node("Identity", f"i{i}", [f"t{i}"], [f"t{i + 1}"], NoAttrs()) for i in range(length)]
    graph = Graph(inputs=[TensorSpec("t0", "float32", (1, 8))], outputs=["y"], nodes=nodes, name="ids")
    graph.nodes.append(Node("Relu", "out", [f"t{length}"], ["y"], NoAttrs()))
    start = time.process_time()
    result = eliminate_noop(graph)
    seconds = time.process_time() - start
    assert [n.inputs for n in result.graph.nodes] == [["t0"]]
    return seconds


def test_removing_a_chain_of_no_ops_is_linear() -> None:
    """Each removal renamed the readers by walking the whole graph: 2,000 Identity nodes took 1.7 s,
    8,000 took 24 s."""
    short, long = _noop_pass_seconds(2000), _noop_pass_seconds(8000)
    assert long < 8 * max(short, 1e-3), (short, long)


def test_a_long_chain_loads_and_plans_in_seconds() -> None:
    """2,000 nodes in well under a second of CPU time (lab/plan_chain.py has the larger sizes)."""
    model = Model(chain(10), RuntimeOptions.resolve(threads=1))
    model.run(np.ones((1, 8), np.float32))  # kernels compiled outside the timing
    start = time.process_time()
    model = Model(chain(2000), RuntimeOptions.resolve(threads=1))
    model.run(np.ones((1, 8), np.float32))
    assert time.process_time() - start < 10  # CPU seconds; about 0.3 s measured
