"""Shared by the CUDA tests: skip without CuPy or a CUDA GPU; run one node on "cuda" and on the numpy
reference; compare within the suite's 1e-4 relative bar."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

pytest.importorskip("cupy")

from edgecnn.devices import cuda_device_infos

if not cuda_device_infos():
    pytest.skip("CuPy finds no CUDA GPU on this machine", allow_module_level=True)

import edgecnn.kernels.cuda  # noqa: F401  (registers the kernels)
from edgecnn.ir.dtypes import dtype_name
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import run_node


def cuda_model(graph: Graph, optimize: bool = True) -> Model:
    """A model planned for the "cuda" backend (the kernels of cuda:0)."""
    return Model(graph, RuntimeOptions.resolve(threads=1, device="cuda", optimize=optimize))


def one_node_graph(
    op: str, attrs: Any, inputs: Sequence[np.ndarray | None], constant_inputs: Sequence[int], outputs: int = 1
) -> tuple[Graph, dict[str, np.ndarray]]:
    names = ["" if x is None else f"in{i}" for i, x in enumerate(inputs)]
    runtime = [i for i, x in enumerate(inputs) if x is not None and i not in constant_inputs]
    graph = Graph(
        [TensorSpec(names[i], dtype_name(inputs[i].dtype), tuple(inputs[i].shape)) for i in runtime],  # type: ignore[union-attr]
        [f"out{i}" for i in range(outputs)],
        [Node(op, "node", names, [f"out{i}" for i in range(outputs)], attrs)],
        {names[i]: np.asarray(inputs[i]) for i in constant_inputs if inputs[i] is not None},
        name=op,
    )
    return graph, {names[i]: inputs[i] for i in runtime}  # type: ignore[misc]


def cuda_run(
    op: str, attrs: Any, inputs: Sequence[np.ndarray | None], constant_inputs: Sequence[int] = ()
) -> tuple[np.ndarray, str]:
    """The node's output on "cuda" (no graph passes) and the name of the kernel that ran."""
    graph, feeds = one_node_graph(op, attrs, inputs, constant_inputs)
    model = cuda_model(graph, optimize=False)
    (step,) = model.plan_for(feeds).steps
    return model.run(feeds)["out0"], step.kernel.name


def reference_run(
    op: str, attrs: Any, inputs: Sequence[np.ndarray | None], constant_inputs: Sequence[int] = ()
) -> np.ndarray:
    (out,) = run_node(op, attrs, inputs, constant_inputs=constant_inputs, device="reference")
    return out


def assert_matches(actual: np.ndarray, expected: np.ndarray, magnitude: float = 1.0) -> None:
    """Same shape and dtype; within rtol 1e-4 and atol 1e-5 x ``magnitude`` (the size of the terms a
    float32 sum adds up, which bounds its rounding); NaN where the reference has NaN."""
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert np.array_equal(np.isnan(actual), np.isnan(expected)), "NaNs differ"
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5 * max(1.0, magnitude), equal_nan=True)


def check_node(
    op: str,
    attrs: Any,
    inputs: Sequence[np.ndarray | None],
    constant_inputs: Sequence[int] = (),
    kernel: str | None = None,
    magnitude: float = 1.0,
) -> str:
    """CUDA equals the reference on this node (and the named kernel ran); returns the kernel name."""
    actual, name = cuda_run(op, attrs, inputs, constant_inputs)
    if kernel is not None:
        assert name == kernel, f"{op} ran {name}, expected {kernel}"
    assert name.startswith("cuda_"), f"{op} fell back to {name}"
    assert_matches(actual, reference_run(op, attrs, inputs, constant_inputs), magnitude)
    return name


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)
