"""FusedConvAdd on the CPU (conv/residual.py) against the numpy reference: random geometry with
hypothesis (groups, depthwise, 1x1, strides, dilations, padding, odd sizes), every activation, bias or
none, 1 and 2 threads, the parallel epilogue on a large tensor, and the cases it must leave to the
reference (a residual that broadcasts, a 1-D convolution)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.kernels.registry import scoped_registrations, select_kernel
from edgecnn.model import Model
from edgecnn.ops.conv import ConvAttrs, conv
from edgecnn.ops.fused import ACTIVATIONS, FusedConvAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import assert_matches, reference_run

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def residual_kernel() -> Iterator[None]:
    """The kernel registered for these tests (kernels/cpu registers it once the lead adds it)."""
    from edgecnn.kernels.cpu.conv import (
        residual as conv_residual,  # imports (registers) the other kernels first
    )

    with scoped_registrations():
        importlib.reload(conv_residual)
        yield


@st.composite
def residual_cases(draw: st.DrawFn) -> dict[str, Any]:
    layout = draw(st.sampled_from(["dense", "grouped", "depthwise", "pointwise", "3x3"]))
    if layout == "depthwise":
        group = draw(st.integers(2, 13))
        in_channels, out_channels = group, group
    else:
        group = draw(st.integers(2, 3)) if layout == "grouped" else 1
        in_channels = group * draw(st.integers(1, 13 // group))
        out_channels = group * draw(st.integers(1, 13 // group))
    if layout == "pointwise":
        kernel, strides, dilations, pads = (1, 1), (1, 1), (1, 1), (0, 0, 0, 0)
    elif layout == "3x3":  # Winograd's shape: 3x3, stride 1, pad 1
        kernel, strides, dilations, pads = (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)
    else:
        kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
        strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
        pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    height = draw(st.integers(max(1, spans[0] - pads[0] - pads[2]), 17))
    width = draw(st.integers(max(1, spans[1] - pads[1] - pads[3]), 17))
    kind = draw(st.sampled_from(ACTIVATIONS))
    low = draw(st.floats(-2.0, 0.5))
    return {
        "x_shape": (draw(st.integers(1, 3)), in_channels, height, width),
        "w_shape": (out_channels, in_channels // group, *kernel),
        "attrs": FusedConvAttrs(
            kernel_shape=kernel,
            strides=strides,
            dilations=dilations,
            pads=pads,
            group=group,
            activation=kind,
            negative_slope=draw(st.floats(0.0, 0.5)),
            low=low,
            high=low + draw(st.floats(0.1, 3.0)),
        ),
        "bias": draw(st.booleans()),
        "threads": draw(st.sampled_from([1, 2])),
        "seed": draw(st.integers(0, 2**16)),
    }


def residual_graph(
    attrs: FusedConvAttrs, w: np.ndarray, b: np.ndarray | None, x_shape: tuple, z_shape: tuple
) -> Graph:
    """x and z are inputs; w and b constants, as the pass leaves them."""
    initializers = {"w": w} if b is None else {"w": w, "b": b}
    return Graph(
        [TensorSpec("x", "float32", x_shape), TensorSpec("z", "float32", z_shape)],
        ["y"],
        [Node("FusedConvAdd", "block", ["x", "w", "b" if b is not None else "", "z"], ["y"], attrs)],
        initializers,
    )


def run_case(
    attrs: FusedConvAttrs, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, z: np.ndarray, threads: int
) -> tuple[np.ndarray, Any]:
    """(the output on device "cpu", the step's kernel choice)."""
    graph = residual_graph(attrs, w, b, x.shape, z.shape)
    model = Model(graph, RuntimeOptions.resolve(threads=threads, optimize=False))
    feeds = {"x": x, "z": z}
    (step,) = model.plan_for(feeds).steps
    with cpu_threads(threads):
        return model.run(feeds)["y"], step.kernel


def check(
    attrs: FusedConvAttrs, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, z: np.ndarray, threads: int
) -> Any:
    actual, kernel = run_case(attrs, x, w, b, z, threads)
    expected = reference_run("FusedConvAdd", attrs, [x, w, b, z], (1, 2))
    plain = ConvAttrs(attrs.kernel_shape, attrs.strides, attrs.pads, attrs.dilations, attrs.group)
    magnitude = conv(plain, np.abs(x), np.abs(w), None if b is None else np.abs(b)) + np.abs(z)
    assert_matches(actual, expected, magnitude)
    return kernel


@SETTINGS
@given(residual_cases())
def test_matches_the_reference(case: dict[str, Any]) -> None:
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x_shape"], dtype=np.float32)
    w = rng.standard_normal(case["w_shape"], dtype=np.float32)
    b = rng.standard_normal(case["w_shape"][0], dtype=np.float32) if case["bias"] else None
    attrs = case["attrs"]
    out_shape = reference_run("FusedConvAdd", attrs, [x, w, b, np.zeros((), np.float32)], (1, 2)).shape
    z = rng.standard_normal(out_shape, dtype=np.float32)
    kernel = check(attrs, x, w, b, z, case["threads"])
    assert kernel.name == "conv_residual"
    # the convolution inside is the kernel the same layer gets as a FusedConv without activation
    inner = Node("FusedConv", "block", ["x", "w", "b"] if b is not None else ["x", "w"], ["y"], attrs)
    inner.attrs = FusedConvAttrs(**{k: getattr(attrs, k) for k in ConvAttrs.__dataclass_fields__})
    types = [TensorSpec("x", "float32", x.shape).type, TensorSpec("w", "float32", w.shape).type]
    values: list[np.ndarray | None] = [None, w]
    if b is not None:
        types.append(TensorSpec("b", "float32", b.shape).type)
        values.append(b)
    assert kernel.run.conv_kernel == select_kernel(inner, types, values).name


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_large_tensor_runs_the_parallel_epilogue(activation: str) -> None:
    """(1, 16, 256, 260): above the epilogue's one-thread grain, so both threads add and activate."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 256, 260), dtype=np.float32)
    w = rng.standard_normal((16, 4, 1, 1), dtype=np.float32)
    b = rng.standard_normal(16, dtype=np.float32)
    z = rng.standard_normal((1, 16, 256, 260), dtype=np.float32)
    z[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, 0.0]  # NaN and infinities pass as in the reference
    attrs = FusedConvAttrs(activation=activation, negative_slope=0.1, low=-0.5, high=1.5)
    actual, kernel = run_case(attrs, x, w, b, z, 2)
    assert kernel.name == "conv_residual" and not kernel.run.small
    with np.errstate(invalid="ignore"):  # -inf * 0 in the reference's hard_swish and silu
        expected = reference_run("FusedConvAdd", attrs, [x, w, b, z], (1, 2))
    assert_matches(actual, expected, 10.0)


def test_residual_that_broadcasts_is_left_to_the_reference() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 5, 5), dtype=np.float32)
    w = rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
    z = rng.standard_normal((1, 4, 1, 1), dtype=np.float32)
    assert check(FusedConvAttrs(activation="relu"), x, w, None, z, 1).name == "reference"


def test_one_dimensional_convolution_is_left_to_the_reference() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 3, 9), dtype=np.float32)
    w = rng.standard_normal((4, 3, 3), dtype=np.float32)
    z = rng.standard_normal((1, 4, 7), dtype=np.float32)
    assert check(FusedConvAttrs(activation="relu"), x, w, None, z, 1).name == "reference"


def test_output_never_shares_the_residual_buffer() -> None:
    """z dies at the fused step, but the step writes the conv into its output before reading z:
    the arena must give the output a buffer of its own (and the result must be right)."""
    rng = np.random.default_rng(6)
    w = rng.standard_normal((4, 4, 3, 3), dtype=np.float32)
    graph = Graph(
        [TensorSpec("x", "float32", (1, 4, 6, 6))],
        ["y"],
        [
            Node("Relu", "shortcut", ["x"], ["z"], NoAttrs()),
            Node("FusedConvAdd", "block", ["x", "w", "", "z"], ["s"], FusedConvAttrs(pads=(1, 1, 1, 1))),
            Node("Relu", "tail", ["s"], ["y"], NoAttrs()),
        ],
        {"w": w},
    )
    model = Model(graph, RuntimeOptions.resolve(threads=1, optimize=False))
    x = rng.standard_normal((1, 4, 6, 6), dtype=np.float32)
    plan = model.plan_for(x)
    assert plan.steps[1].kernel.name == "conv_residual"
    memory = plan.memory
    assert 1 not in memory.buffers.in_place
    assert memory.buffers.root[plan.slots["s"]] != memory.buffers.root[plan.slots["z"]]
    expected = np.maximum(
        reference_run("FusedConvAdd", graph.nodes[1].attrs, [x, w, None, np.maximum(x, 0)], (1,)), 0
    )
    for _ in range(2):  # the second run reuses the arena
        np.testing.assert_allclose(model(x), expected, rtol=1e-5, atol=1e-5)  # type: ignore[arg-type]


@pytest.mark.parametrize(("channels", "side"), [(64, 8), (256, 7)])  # the in-place 1x1 kernel; pixel rows
def test_output_takes_the_buffer_of_a_residual_that_dies(channels: int, side: int) -> None:
    """A 1x1 bottleneck tail whose kernel adds z itself, value by value where it writes y: with z
    dead after the step, the arena gives y z's buffer, except where the pixel-row kernel reads its
    input in place and asks for a fresh buffer; the sum is right run after run either way."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((channels, channels, 1, 1), dtype=np.float32)
    b = rng.standard_normal(channels, dtype=np.float32)
    graph = Graph(
        [TensorSpec("x", "float32", (1, channels, side, side))],
        ["y"],
        [
            Node("Relu", "shortcut", ["x"], ["z"], NoAttrs()),
            Node("FusedConvAdd", "block", ["x", "w", "b", "z"], ["s"], FusedConvAttrs(activation="relu")),
            Node("Relu", "tail", ["s"], ["y"], NoAttrs()),  # s inside the arena: a graph output is not
        ],
        {"w": w, "b": b},
    )
    model = Model(graph, RuntimeOptions.resolve(threads=2, optimize=False))
    x = rng.standard_normal((1, channels, side, side), dtype=np.float32)
    plan = model.plan_for(x)
    step = plan.steps[1]
    adds_itself = step.kernel.run.conv_kernel in ("pointwise", "pixel_rows")
    declines = step.kernel.run.conv_kernel == "pixel_rows"  # 1x1, stride 1: read in place
    memory = plan.memory
    assert (memory.buffers.in_place.get(1) == 3) == (adds_itself and not declines)
    expected = reference_run("FusedConvAdd", graph.nodes[1].attrs, [x, w, b, np.maximum(x, 0)], (1, 2))
    scale = float(np.abs(x).max() * np.abs(w).sum(axis=1).max() + 10.0)
    for _ in range(2):
        assert_matches(model(x), expected, scale)  # type: ignore[arg-type]
    if channels == 64:
        assert adds_itself  # the in-place 1x1 kernel takes it on every machine
