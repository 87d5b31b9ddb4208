"""The Model contract: run / __call__ / outputs= / profile, input validation, plan caching, threads."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from edgecnn.errors import InputError
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.activation import LeakyReluAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.runtime.options import RuntimeOptions


def two_layer_model() -> Model:
    graph = Graph(
        inputs=[TensorSpec("x", "float32", ("N", 3))],
        outputs=["y"],
        nodes=[
            Node("LeakyRelu", "leaky", ["h"], ["y"], LeakyReluAttrs(0.5)),
            Node("Relu", "relu", ["x"], ["h"], NoAttrs()),
        ],
    )
    return Model(graph, RuntimeOptions.resolve(threads=1))


def two_input_model() -> Model:
    graph = Graph(
        inputs=[TensorSpec("a", "float32", ("N", 2)), TensorSpec("b", "float32", ("N", 2))],
        outputs=["ra", "rb"],
        nodes=[Node("Relu", "r1", ["a"], ["ra"], NoAttrs()), Node("Relu", "r2", ["b"], ["rb"], NoAttrs())],
    )
    return Model(graph)


def test_specs_and_symbolic_output_shape() -> None:
    model = two_layer_model()
    assert [(s.name, s.dtype, s.shape) for s in model.inputs] == [("x", "float32", ("N", 3))]
    assert [(s.name, s.dtype, s.shape) for s in model.outputs] == [("y", "float32", ("N", 3))]


def test_run_call_and_intermediate_outputs() -> None:
    model = two_layer_model()
    x = np.array([[-1.0, 2.0, -3.0]], np.float32)
    np.testing.assert_array_equal(model(x), [[0.0, 2.0, 0.0]])
    result = model.run({"x": x}, outputs=["h", "y"])
    assert set(result) == {"h", "y"}
    np.testing.assert_array_equal(result["h"], [[0.0, 2.0, 0.0]])
    np.testing.assert_array_equal(model.run(x)["y"], model(x))


def test_results_never_alias_inputs() -> None:
    graph = Graph([TensorSpec("x", "float32", (2,))], ["x"], [])
    model = Model(graph)
    x = np.ones(2, np.float32)
    out = model(x)
    out[0] = 5
    assert x[0] == 1


def test_multi_output_call_returns_tuple_and_dict_feeds_required() -> None:
    model = two_input_model()
    a, b = np.ones((1, 2), np.float32), -np.ones((1, 2), np.float32)
    ra, rb = model(a, b)
    np.testing.assert_array_equal(ra, a)
    np.testing.assert_array_equal(rb, 0)
    with pytest.raises(InputError, match="pass a dict"):
        model.run(a)
    with pytest.raises(InputError, match="takes 2 input"):
        model(a)


@pytest.mark.parametrize(
    ("feeds", "message"),
    [
        ({"z": np.ones((1, 3), np.float32)}, "unknown input name.*'z'.*x"),
        ({}, "missing input"),
        ({"x": np.ones((1, 3), np.float64)}, "expected dtype float32, got float64"),
        ({"x": np.ones((1, 4), np.float32)}, r"expected shape \[N, 3\], got \[1, 4\]"),
        ({"x": np.ones((3,), np.float32)}, "rank 2"),
        ({"x": "not a number"}, "cannot convert"),
    ],
)
def test_bad_feeds_raise_input_error(feeds: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        two_layer_model().run(feeds)


def test_symbolic_dims_bind_nothing_across_independent_inputs() -> None:
    """As in onnxruntime: sizes the graph needs equal are checked by shape inference instead
    (tests/importers/onnx_dims)."""
    out = two_input_model().run({"a": np.ones((2, 2), np.float32), "b": np.ones((3, 2), np.float32)})
    assert out["ra"].shape == (2, 2) and out["rb"].shape == (3, 2)


def test_lists_are_converted_to_the_declared_dtype() -> None:
    np.testing.assert_array_equal(two_layer_model()([[1, -1, 2]]), [[1, 0, 2]])


def test_unknown_requested_output() -> None:
    with pytest.raises(InputError, match="unknown output name"):
        two_layer_model().run(np.ones((1, 3), np.float32), outputs=["nope"])
    with pytest.raises(InputError, match=r"'leaky' is a node; its output tensor\(s\): y"):
        two_layer_model().run(np.ones((1, 3), np.float32), outputs=["leaky"])


def test_plans_are_cached_per_input_shape() -> None:
    model = two_layer_model()
    p1 = model.plan_for(np.ones((1, 3), np.float32))
    p2 = model.plan_for(np.ones((5, 3), np.float32))
    assert p1 is not p2
    assert model.plan_for(np.zeros((1, 3), np.float32)) is p1
    assert p2.types["y"].shape == (5, 3)


def test_profile_reports_every_layer() -> None:
    profile = two_layer_model().profile(np.ones((4, 3), np.float32), iterations=3, warmup=1)
    assert [layer.name for layer in profile.layers] == ["relu", "leaky"]
    assert len(profile.iteration_ms) == 3
    assert abs(sum(layer.share for layer in profile.layers) - 1.0) < 1e-9
    with pytest.raises(InputError):
        two_layer_model().profile(np.ones((4, 3), np.float32), iterations=0)


def test_concurrent_runs_from_many_threads_agree() -> None:
    model = two_layer_model()
    rng = np.random.default_rng(0)
    batches = [rng.standard_normal((int(n), 3)).astype(np.float32) for n in rng.integers(1, 6, size=64)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(model, batches))
    for x, y in zip(batches, results):
        np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_threads_option_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGECNN_NUM_THREADS", "3")
    assert RuntimeOptions.resolve().threads == 3
    assert RuntimeOptions.resolve(threads=1).threads == 1
    monkeypatch.setenv("EDGECNN_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="EDGECNN_NUM_THREADS"):
        RuntimeOptions.resolve()
    monkeypatch.delenv("EDGECNN_NUM_THREADS")
    assert RuntimeOptions.resolve().threads >= 1


def test_the_thread_budget_applies_while_a_model_runs() -> None:
    import numba

    from edgecnn.kernels.cpu.system.threads import blas_threads
    from edgecnn.runtime.executor import execute

    seen = []

    class Spy:
        def before(self, step: object) -> None:
            seen.append((numba.get_num_threads(), blas_threads()))

        def after(self, step: object, outputs: object) -> None:
            pass

    outside = numba.get_num_threads()
    model = Model(two_layer_model().graph, RuntimeOptions.resolve(threads=1))
    x = np.ones((1, 3), np.float32)
    execute(model.plan_for(x), model.check_feeds(x), (Spy(),))
    assert seen and all(numba_threads == 1 for numba_threads, _ in seen)
    assert numba.get_num_threads() == outside
