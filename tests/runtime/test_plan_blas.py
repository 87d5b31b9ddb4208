"""Plans for the CPU are built with BLAS on one thread (the weight transforms' GEMMs are short), and
the count BLAS had before comes back afterwards; other devices' plans leave BLAS alone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from edgecnn.ir.graph import Graph, Node, TensorSpec, TensorType
from edgecnn.kernels.cpu.system import threads
from edgecnn.kernels.registry import register_kernel, scoped_registrations
from edgecnn.ops.registry import NoAttrs
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.runtime.plan import build_plan


@pytest.fixture
def two_blas_threads() -> Iterator[None]:
    before = threads.blas_threads()
    threads.set_blas_threads(2)
    if threads.blas_threads() != 2:
        threads.set_blas_threads(before)
        pytest.skip("this BLAS cannot run two threads here")
    try:
        yield
    finally:
        threads.set_blas_threads(before)


def relu_graph() -> Graph:
    return Graph(
        inputs=[TensorSpec("x", "float32", (2, 3))],
        outputs=["y"],
        nodes=[Node("Relu", "act", ["x"], ["y"], NoAttrs())],
        initializers={},
    )


@pytest.mark.parametrize("device", ["cpu", "reference"])
def test_kernel_factories_run_with_one_blas_thread(two_blas_threads: None, device: str) -> None:
    seen: list[int] = []

    def probe(node: Node, types: Any, values: Any) -> Any:
        seen.append(threads.blas_threads())
        return lambda x: np.maximum(x, np.float32(0))

    with scoped_registrations():
        register_kernel("Relu", priority=99, name="probe")(probe)
        plan = build_plan(
            relu_graph(),
            {"x": TensorType("float32", (2, 3))},
            RuntimeOptions.resolve(threads=2, device=device),
        )
    assert seen == ([1] if device == "cpu" else [])
    assert [s.kernel.name for s in plan.steps] == (["probe"] if device == "cpu" else ["reference"])
    assert threads.blas_threads() == 2  # restored
