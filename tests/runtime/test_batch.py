"""Batch-level parallelism: a split batch gives the unsplit run's results, and only models that
keep their images apart are split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from edgecnn.bench.zoo import build_model
from edgecnn.importers import load_graph
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.activation import SoftmaxAttrs
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import FlattenAttrs, TransposeAttrs
from edgecnn.runtime.batch import batch_separable, slice_bounds, split_pays, threading_layer_is_safe
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import assert_close


def model_of(graph: Graph, policy: str, threads: int = 2) -> Model:
    return Model(graph, RuntimeOptions.resolve(threads=threads, batch_parallel=policy))


@pytest.fixture(scope="module")
def zoo_graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Graph]:
    root: Path = tmp_path_factory.mktemp("zoo")
    graphs = {}
    for name in ("resnet18", "shufflenetv2", "googlenet"):
        path = root / f"{name}.onnx"
        onnx.save(build_model(name, width=0.25, resolution=48), str(path))
        graphs[name] = load_graph(path)
    return graphs


def test_slice_bounds_cover_the_batch() -> None:
    assert slice_bounds(5, 2) == [(0, 3), (3, 5)]
    assert slice_bounds(8, 2) == [(0, 4), (4, 8)]
    assert slice_bounds(2, 4) == [(0, 1), (1, 2)]


@pytest.mark.parametrize("name", ["resnet18", "shufflenetv2", "googlenet"])
@pytest.mark.parametrize("batch", [2, 3])
def test_split_batch_equals_the_unsplit_run(zoo_graphs: dict[str, Graph], name: str, batch: int) -> None:
    whole = model_of(zoo_graphs[name], "never")
    split = model_of(zoo_graphs[name], "always")
    x = np.random.default_rng(batch).standard_normal((batch, 3, 48, 48)).astype(np.float32)
    expected = whole(x)
    got = split(x)
    assert_close(got, expected)
    plan = split.plan_for(x)
    assert batch_separable(plan, batch)
    if threading_layer_is_safe():  # numba's pool started by the runs above; omp or tbb
        assert plan.split is not None and batch - batch // 2 in plan.split.plans  # slices have plans


def test_results_of_a_split_run_are_fresh_arrays(zoo_graphs: dict[str, Graph]) -> None:
    model = model_of(zoo_graphs["resnet18"], "always")
    x = np.random.default_rng(0).standard_normal((2, 3, 48, 48)).astype(np.float32)
    first = model(x)
    kept = first.copy()
    model(-x)
    np.testing.assert_array_equal(first, kept)


def chain(*nodes: Node, shape: tuple[int, ...] = (4, 3, 2, 2)) -> Graph:
    return Graph([TensorSpec("x", "float32", shape)], [nodes[-1].outputs[0]], list(nodes))


def test_models_that_mix_the_batch_are_not_split() -> None:
    x = np.random.default_rng(0).standard_normal((4, 3, 2, 2)).astype(np.float32)
    cases = {
        "softmax over the batch": chain(Node("Softmax", "s", ["x"], ["y"], SoftmaxAttrs(axis=0))),
        "transpose moving the batch": chain(
            Node("Transpose", "t", ["x"], ["t"], TransposeAttrs((1, 0, 2, 3))),
            Node("Relu", "r", ["t"], ["y"], NoAttrs()),
        ),
        "flatten of everything": chain(Node("Flatten", "f", ["x"], ["y"], FlattenAttrs(0))),
    }
    for why, graph in cases.items():
        model = model_of(graph, "always")
        assert not batch_separable(model.plan_for(x), 4), why
        assert_close(model(x), model_of(graph, "never")(x))
    per_image = chain(
        Node("Softmax", "s", ["x"], ["s"], SoftmaxAttrs(axis=1)),
        Node("Flatten", "f", ["s"], ["y"], FlattenAttrs(1)),
    )
    assert batch_separable(model_of(per_image, "always").plan_for(x), 4)


def conv_then_dense(dense_outputs: int, channels: int = 64) -> Graph:
    """A 3x3 conv (channels x 16 x 9 x 64 x 64 multiply-adds per image), global pool, a dense layer."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((channels, 16, 3, 3)).astype(np.float32)
    fc = rng.standard_normal((channels, dense_outputs)).astype(np.float32)
    return Graph(
        inputs=[TensorSpec("x", "float32", ("N", 16, 64, 64))],
        outputs=["y"],
        nodes=[
            Node("Conv", "conv", ["x", "w"], ["c"], ConvAttrs(pads=(1, 1, 1, 1))),
            Node("GlobalAveragePool", "gap", ["c"], ["g"], NoAttrs()),
            Node("Flatten", "flat", ["g"], ["f"], FlattenAttrs(1)),
            Node("Gemm", "fc", ["f", "fc"], ["y"], GemmAttrs()),
        ],
        initializers={"w": w, "fc": fc},
    )


def test_auto_rule_splits_conv_work_but_not_tiny_images_or_large_dense_weights() -> None:
    x = np.zeros((4, 16, 64, 64), np.float32)
    conv_heavy = model_of(conv_then_dense(1000), "auto").plan_for(x)  # 37.7 MMAC/image, 256 KB dense
    assert split_pays(conv_heavy, 4, 2)
    tiny = model_of(conv_then_dense(1000, channels=8), "auto").plan_for(x)  # 4.7 MMAC/image
    assert not split_pays(tiny, 4, 2)
    dense = model_of(conv_then_dense(80_000), "auto").plan_for(x)  # 20 MB of dense weights
    assert not split_pays(dense, 4, 2)
