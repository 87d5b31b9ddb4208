"""Test helpers, public so users can check their own kernels the way edgecnn checks its own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from edgecnn.ir.dtypes import dtype_name
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.runtime.plan import Plan, Step, plan_program

ODD_SIZES = (1, 3, 7, 13, 17, 31)
"""Sizes that exercise vector tails and edge handling in fast kernels."""


class TypeCheckHook:
    """Executor hook asserting that every kernel output matches the plan's inferred type."""

    def __init__(self, plan_types: dict[str, Any]) -> None:
        self.plan_types = plan_types

    def before(self, step: Step) -> None:
        pass

    def after(self, step: Step, outputs: tuple[np.ndarray, ...]) -> None:
        for name, value in zip(step.node.outputs, outputs):
            if not name:
                continue
            expected = self.plan_types[name]
            got = (dtype_name(np.asarray(value).dtype), tuple(np.shape(value)))
            assert (expected.dtype, expected.shape) == got, (
                f"node {step.node}: inferred {expected}, kernel produced {got[0]}{list(got[1])}"
            )


def run_node(
    op: str,
    attrs: Any,
    inputs: Sequence[np.ndarray | None],
    *,
    num_outputs: int = 1,
    constant_inputs: Sequence[int] = (),
    device: str = "cpu",
) -> tuple[np.ndarray, ...]:
    """Run one operator through the whole pipeline (inference, plan, kernel) and check that
    every output matches its inferred dtype and shape. ``None`` marks an omitted input;
    indices in ``constant_inputs`` become initializers (so they may be folded)."""
    names = ["" if x is None else f"in{i}" for i, x in enumerate(inputs)]
    graph_inputs = [
        TensorSpec(n, dtype_name(x.dtype), tuple(x.shape))
        for i, (n, x) in enumerate(zip(names, inputs))
        if x is not None and i not in constant_inputs
    ]
    initializers = {names[i]: np.asarray(inputs[i]) for i in constant_inputs if inputs[i] is not None}
    outputs = [f"out{i}" for i in range(num_outputs)]
    graph = Graph(graph_inputs, outputs, [Node(op, "node", names, outputs, attrs)], initializers, name=op)
    model = Model(graph, RuntimeOptions.resolve(threads=1, device=device))
    feeds = {spec.name: inputs[int(spec.name[2:])] for spec in graph_inputs}
    for spec, declared in zip(model.outputs, outputs):
        assert spec.name == declared
    if not graph_inputs:  # everything constant: the node is folded at plan time
        result = model.run({})
        return tuple(result[o] for o in outputs)
    plan = model.plan_for(feeds, outputs=outputs)
    from edgecnn.runtime.executor import execute

    result = execute(plan, model.check_feeds(feeds), (TypeCheckHook(dict(plan.types)),))
    for name in outputs:
        t = plan.types[name]
        assert (t.dtype, t.shape) == (dtype_name(result[name].dtype), result[name].shape), name
    return tuple(result[o] for o in outputs)


def run_without_arena(
    plan: Plan, feeds: Mapping[str, np.ndarray], wanted: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """Run ``plan``'s steps with each one returning new outputs, no arena, no views, nothing in place:
    the independent check of arena execution (and the allocation baseline it is measured against)."""
    from edgecnn.runtime.executor import execute

    names = plan.wanted if wanted is None else tuple(wanted)
    return execute(plan_program(plan.program, names, 1, in_arena=False), feeds)


def assert_close(actual: np.ndarray, expected: np.ndarray, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """Same dtype, same shape, values within tolerance (the 1e-4 relative bar of the test suite)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != expected {expected.shape}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != expected {expected.dtype}"
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def reference_run(
    op: str, attrs: Any, inputs: Sequence[np.ndarray | None], constant_inputs: Sequence[int] = ()
) -> np.ndarray:
    """The node's first output from its numpy reference kernel, through the whole pipeline as in
    :func:`run_node` (device "reference"): what a fast kernel is compared with."""
    (out,) = run_node(op, attrs, inputs, constant_inputs=constant_inputs, device="reference")
    return out


def assert_matches(actual: np.ndarray, expected: np.ndarray, magnitude: float | np.ndarray = 1.0) -> None:
    """A fast kernel's output equals the reference's: same shape and dtype, NaN exactly where the
    reference has NaN, the same infinities, and every other element within

        |actual - expected| <= 1e-4 * |expected| + 1e-5 * max(1, magnitude)

    ``magnitude`` (a number, or one per element) is the size of the terms summed into an element,
    e.g. conv(|x|, |w|) + |b|: a float32 sum is only exact to its terms' size, so a result whose
    terms cancel is compared at their scale, not at its own. The default suits ops that sum little."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert np.array_equal(np.isnan(actual), np.isnan(expected)), "NaNs differ from the reference's"
    atol = np.broadcast_to(1e-5 * np.maximum(1.0, magnitude), expected.shape)
    compared = ~np.isnan(expected) & (actual != expected)  # equal infinities are exact
    a, e = actual[compared].astype(np.float64), expected[compared].astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf where the reference is infinite
        excess = np.abs(a - e) - 1e-4 * np.abs(e) - atol[compared]
    over = ~(excess <= 0)  # NaN excess: a finite result where the reference is infinite
    if over.any():
        worst = int(np.argmax(np.where(over, np.nan_to_num(excess, nan=np.inf), -np.inf)))
        raise AssertionError(
            f"{int(over.sum())} of {actual.size} elements differ from the reference: {float(a[worst])} for"
            f" {float(e[worst])} is over the bound by {excess[worst]:.3g} (atol {atol[compared][worst]:.3g})"
        )
