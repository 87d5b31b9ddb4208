"""Arena execution: results equal the plain executor's, never alias the arena, concurrent runs
do not share one, and a steady-state run allocates no activation memory (tracemalloc)."""

from __future__ import annotations

import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import pytest

from edgecnn.bench.zoo import build_model
from edgecnn.importers import load_graph
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import ConcatAttrs, FlattenAttrs, SplitAttrs
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import assert_close, run_without_arena

ZOO = ("resnet18", "googlenet", "mobilenetv2", "shufflenetv2", "squeezenet1.1")


@pytest.fixture(scope="module")
def zoo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("zoo")
    for name in ZOO:
        onnx.save(build_model(name, width=0.25, resolution=48), str(root / f"{name}.onnx"))
    return root


def load(path: Path, threads: int = 1, **options: object) -> Model:
    return Model(load_graph(path), RuntimeOptions.resolve(threads=threads, **options))  # type: ignore[arg-type]


def image(model: Model, batch: int = 1, seed: int = 0) -> np.ndarray:
    shape = [batch if not isinstance(d, int) or i == 0 else d for i, d in enumerate(model.inputs[0].shape)]
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def small_graph() -> Graph:
    """conv -> relu (in place) -> flatten (a view) -> relu, with the conv output also requested."""
    w = np.random.default_rng(1).standard_normal((8, 3, 3, 3)).astype(np.float32)
    return Graph(
        inputs=[TensorSpec("x", "float32", ("N", 3, 24, 24))],
        outputs=["y"],
        nodes=[
            Node("Conv", "conv", ["x", "w"], ["c"], ConvAttrs()),
            Node("Relu", "relu1", ["c"], ["r"], NoAttrs()),
            Node("Flatten", "flat", ["r"], ["f"], FlattenAttrs(1)),
            Node("Relu", "relu2", ["f"], ["y"], NoAttrs()),
        ],
        initializers={"w": w},
    )


def test_views_and_in_place_steps_match_the_plain_executor() -> None:
    model = Model(small_graph(), RuntimeOptions.resolve(threads=1, optimize=False))
    x = np.random.default_rng(0).standard_normal((2, 3, 24, 24)).astype(np.float32)
    plan = model.plan_for(x)
    memory = model.plan_for(x, outputs=["y"]).memory
    assert [step.kernel.name for step in plan.steps] == [
        "direct_gemm",
        "activation",
        "reference",
        "activation",
    ]
    assert memory.buffers.in_place == {1: 0}  # relu1 overwrites the conv output, which dies there
    assert memory.buffers.root[plan.slots["f"]] == memory.buffers.root[plan.slots["c"]]
    expected = run_without_arena(plan, {"x": x}, ["y", "c"])
    got = model.run(x, outputs=["y", "c"])
    for name in ("y", "c"):
        assert_close(got[name], expected[name])
    # asking for c pins it: relu1 may no longer overwrite it, and c is still the conv's output
    assert (got["c"] < 0).any()
    # f, a view of relu1's output, is returned: relu1 then runs in place in the result's own buffer
    assert_close(model.run(x, outputs=["f"])["f"], run_without_arena(plan, {"x": x}, ["f"])["f"])


def test_results_do_not_alias_the_arena() -> None:
    model = Model(small_graph(), RuntimeOptions.resolve(threads=1))
    a = np.random.default_rng(0).standard_normal((1, 3, 24, 24)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((1, 3, 24, 24)).astype(np.float32)
    first = model(a)
    kept = first.copy()
    second = model(b)
    np.testing.assert_array_equal(first, kept)  # the second run did not write into the first result
    assert not np.array_equal(first, second)
    first[...] = 7  # and writing a result does not disturb the next run
    np.testing.assert_array_equal(model(b), second)


@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_equals_the_plain_executor(zoo_dir: Path, name: str) -> None:
    model = load(zoo_dir / f"{name}.onnx")
    x = image(model)
    plan = model.plan_for(x)
    expected = run_without_arena(plan, {model.inputs[0].name: x}, model.graph.outputs)
    got = model.run(x)
    for out in model.graph.outputs:
        assert_close(got[out], expected[out])


def traced_run_bytes(model: Model, x: np.ndarray) -> tuple[int, int]:
    """(peak bytes traced during one run above the level before it, bytes it returned)."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        result = model.run(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before, sum(v.nbytes for v in result.values())


@pytest.mark.parametrize("name", ZOO)
def test_steady_state_run_allocates_only_its_outputs(zoo_dir: Path, name: str) -> None:
    model = load(zoo_dir / f"{name}.onnx")
    x = image(model)
    for _ in range(2):
        model.run(x)  # warm-up: plan, arena, kernel scratch
    peak, returned = traced_run_bytes(model, x)
    plan = model.plan_for(x)
    activations = plan.memory.buffers.naive_bytes
    # Python objects of the loop (frames, small views, tuples) are a few KiB; activations are far more.
    assert peak <= returned + 32 * 1024 < activations
    plain_peak = _plain_run_peak(model, x)
    assert plain_peak > peak  # the executor without the arena allocates every activation


def _plain_run_peak(model: Model, x: np.ndarray) -> int:
    plan = model.plan_for(x)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        run_without_arena(plan, {model.inputs[0].name: x}, model.graph.outputs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before


def test_concurrent_runs_with_different_inputs(zoo_dir: Path) -> None:
    model = load(zoo_dir / "resnet18.onnx", threads=1)
    inputs = [image(model, seed=s) for s in range(4)]
    expected = [model(x) for x in inputs]

    def worker(index: int) -> bool:
        # Not bitwise: OpenBLAS may round differently on another thread even without concurrency.
        # A run reading another run's arena would be off by far more than this tolerance.
        for k in range(12):
            j = (index + k) % 4
            if not np.allclose(model(inputs[j]), expected[j], rtol=1e-4, atol=1e-5):
                return False
        return True

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(worker, range(4)))
    plan = model.plan_for(inputs[0])
    memory = plan.memory
    assert 1 <= len(memory._idle) <= 4  # one arena per concurrent run, kept for reuse


def test_an_elided_concat_returned_through_a_view() -> None:
    """Two convs write their slabs of a Concat whose output the caller receives via Flatten."""
    rng = np.random.default_rng(2)
    graph = Graph(
        inputs=[TensorSpec("x", "float32", (1, 3, 8, 8))],
        outputs=["y"],
        nodes=[
            Node("Conv", "a", ["x", "wa"], ["a"], ConvAttrs(pads=(1, 1, 1, 1))),
            Node("Conv", "b", ["x", "wb"], ["b"], ConvAttrs()),
            Node("Concat", "cat", ["a", "b"], ["c"], ConcatAttrs(axis=1)),
            Node("Flatten", "flat", ["c"], ["y"], FlattenAttrs(1)),
        ],
        initializers={
            "wa": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
            "wb": rng.standard_normal((5, 3, 1, 1)).astype(np.float32),
        },
    )
    model = Model(graph, RuntimeOptions.resolve(threads=1, optimize=False))
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    plan = model.plan_for(x)
    for wanted in (["y"], ["c"], ["y", "a"]):
        memory = model.plan_for(x, outputs=wanted).memory
        # only a Concat output reached through a view is elided: a returned Concat output or input
        # is written by its own kernel into the buffer handed to the caller
        assert bool(memory.buffers.elided) == (wanted == ["y"])
        expected = run_without_arena(plan, {"x": x}, wanted)
        got = model.run(x, outputs=wanted)
        for name in wanted:
            assert_close(got[name], expected[name])


def test_a_split_read_where_it_lies() -> None:
    """A conv's output split by channels (ShuffleNetV2's branch split): the halves are read in the
    conv's buffer unless the caller receives the conv's output or a half; at batch 2 they are
    copied. Results equal the plain executor's either way."""
    rng = np.random.default_rng(3)
    graph = Graph(
        inputs=[TensorSpec("x", "float32", ("N", 3, 6, 6))],
        outputs=["y"],
        nodes=[
            Node("Conv", "a", ["x", "wa"], ["a"], ConvAttrs(pads=(1, 1, 1, 1))),
            Node("Split", "split", ["a"], ["left", "right"], SplitAttrs(axis=1, num_outputs=2)),
            Node("Conv", "b", ["right", "wb"], ["b"], ConvAttrs()),
            Node("Relu", "r", ["b"], ["c"], NoAttrs()),
            Node("Concat", "cat", ["left", "c"], ["y"], ConcatAttrs(axis=1)),
        ],
        initializers={
            "wa": rng.standard_normal((8, 3, 3, 3)).astype(np.float32),
            "wb": rng.standard_normal((4, 4, 1, 1)).astype(np.float32),
        },
    )
    model = Model(graph, RuntimeOptions.resolve(threads=1, optimize=False))
    for batch in (1, 2):
        x = rng.standard_normal((batch, 3, 6, 6)).astype(np.float32)
        plan = model.plan_for(x)
        for wanted in (["y"], ["y", "a"], ["y", "right"], ["left", "c"]):
            memory = model.plan_for(x, outputs=wanted).memory
            split_index = [step.node.name for step in plan.steps].index("split")
            viewed = split_index in memory.buffers.elided
            assert viewed == (batch == 1 and not {"a", "left", "right"} & set(wanted))
            expected = run_without_arena(plan, {"x": x}, wanted)
            got = model.run(x, outputs=wanted)
            for name in wanted:
                assert_close(got[name], expected[name])
