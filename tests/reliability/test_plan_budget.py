"""Planning keeps a run within the memory limit before it allocates (issue 34): the workspace of
reference kernels counts with the arena, im2col's tap table and the pools' tables stay small
whatever a layer's geometry (the fuzz findings of tests/fuzz_corpus, here as unit cases)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from edgecnn.errors import GraphError
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.kernels.cpu.conv.im2col import NO_TAP_TABLE, tap_table
from edgecnn.kernels.cpu.pool.pool1d import window_divisors
from edgecnn.limits import MemoryBudget, using_budget
from edgecnn.model import Model
from edgecnn.ops.conv import ConvTransposeAttrs
from edgecnn.ops.pool import MaxPoolAttrs, max_pool
from edgecnn.ops.resize import ResizeAttrs
from edgecnn.runtime.options import RuntimeOptions


def one_node_model(op: str, attrs: Any, x: np.ndarray, constants: dict[str, np.ndarray], limit: str) -> Model:
    inputs = ["x", *constants] if op != "Resize" else ["x", "", *constants]
    graph = Graph(
        [TensorSpec("x", "float32", x.shape)], ["y"], [Node(op, "layer", inputs, ["y"], attrs)], constants
    )
    return Model(graph, RuntimeOptions.resolve(threads=1, memory_limit=limit))


def peak_while(action: Callable[[], Any]) -> int:
    """Bytes numpy allocated at the peak of ``action`` (tracemalloc sees numpy's buffers)."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


CASES = {
    # 5x5 taps at stride 1: the reference's columns are 25 times the input per output channel
    "ConvTranspose": (
        ConvTransposeAttrs(kernel_shape=(5, 5)),
        (1, 4, 96, 96),
        {"w": np.full((4, 4, 5, 5), 0.01, np.float32)},
    ),
    # linear interpolation in float64, two taps per output value
    "Resize": (ResizeAttrs(mode="linear"), (1, 4, 64, 64), {"scales": np.array([1, 1, 4, 4], np.float32)}),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_a_reference_kernels_workspace_is_refused_before_the_run(op: str) -> None:
    attrs, shape, constants = CASES[op]
    x = np.ones(shape, np.float32)
    tight = one_node_model(op, attrs, x, constants, "3M")  # its tensors fit, its workspace does not
    refusals: list[GraphError] = []

    def run_refused() -> None:
        with pytest.raises(GraphError) as refused:
            tight.run({"x": x})
        refusals.append(refused.value)

    assert peak_while(run_refused) < 3 << 20
    message = str(refusals[0])
    assert f"node layer ({op}) works in" in message and "over the memory limit of 3.0 MiB" in message
    roomy = one_node_model(op, attrs, x, constants, "256M")
    assert roomy.run({"x": x})["y"].shape[2] > shape[2]


def test_the_tap_table_matches_its_definition_and_stays_within_its_share() -> None:
    geometry: tuple[Any, ...] = (9, 7, (3, 3), (2, 1), (1, 1), (1, 2), (5, 5))
    table = tap_table(*geometry)
    height, width, kernel, strides, pads, dilations, out = geometry
    for t in range(kernel[0] * kernel[1]):
        for p in range(out[0] * out[1]):
            iy = p // out[1] * strides[0] - pads[0] + t // kernel[1] * dilations[0]
            ix = p % out[1] * strides[1] - pads[1] + t % kernel[1] * dilations[1]
            inside = 0 <= iy < height and 0 <= ix < width
            assert table[t, p] == (iy * width + ix if inside else -1)
    # the fuzz case: a 1048576 pad makes a 3x3 layer's output 2097155 x 4 (a 288 MiB table)
    huge = (5, 6, (3, 3), (1, 1), (1 << 20, 0), (1, 1), ((1 << 21) + 3, 4))
    with using_budget(MemoryBudget(512 << 20)):
        assert tap_table(*huge) is NO_TAP_TABLE
    with using_budget(MemoryBudget(64 << 30)):
        built = peak_while(lambda: tap_table(5, 6, (3, 3), (1, 1), (1 << 16, 0), (1, 1), ((1 << 17) + 3, 4)))
    table_bytes = 9 * ((1 << 17) + 3) * 4 * 4
    assert built < 2 * table_bytes  # one tap at a time (every tap at once in int64 took 8.7 times)


def test_average_pool_divisors_of_a_million_tap_window_cost_the_outputs_only() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        length, out, taps = (int(v) for v in rng.integers(1, 12, 3))
        stride, dilation = (int(v) for v in rng.integers(1, 4, 2))
        pads = (int(rng.integers(0, 4)), int(rng.integers(0, 4)))
        with_pads = bool(rng.integers(0, 2))
        positions = np.arange(out)[:, None] * stride + np.arange(taps)[None, :] * dilation - pads[0]
        low, high = (-pads[0], length + pads[1]) if with_pads else (0, length)
        expected = ((positions >= low) & (positions < high)).sum(axis=1)
        assert np.array_equal(window_divisors(length, out, taps, stride, dilation, pads, with_pads), expected)
    # the radar fuzz case: a window of 2**20 taps over 71 outputs was a 71 x 2**20 table
    peak = peak_while(lambda: window_divisors(1 << 20, 71, 1 << 20, 1, 1, (1 << 20, 0), False))
    assert peak < 64 << 10


def test_a_pool_stride_far_wider_than_its_input_runs_without_a_stride_sized_scratch() -> None:
    attrs = MaxPoolAttrs(kernel_shape=(2, 2), strides=(1 << 31, 1 << 31))
    x = np.random.default_rng(1).standard_normal((1, 4, 6, 4)).astype(np.float32)
    graph = Graph(
        [TensorSpec("x", "float32", x.shape)], ["y"], [Node("MaxPool", "pool", ["x"], ["y"], attrs)]
    )
    model = Model(graph, RuntimeOptions.resolve(threads=1, memory_limit="256M"))
    assert [s.kernel.name for s in model.plan_for({"x": x}).steps] == ["reference"]
    np.testing.assert_array_equal(model.run({"x": x})["y"], max_pool(attrs, x))


def test_the_pool_kernels_per_call_tables_count_with_the_arena() -> None:
    # a tall, narrow output: pool_2d's tap ranges, divisors and per-worker scratch are 2-4 times
    # the 12.8 MB output, which alone fits the limit
    attrs = MaxPoolAttrs(kernel_shape=(3, 1), strides=(1, 1))
    x = np.ones((1, 4, 400_000, 2), np.float32)
    graph = Graph(
        [TensorSpec("x", "float32", x.shape)], ["y"], [Node("MaxPool", "pool", ["x"], ["y"], attrs)]
    )
    tight = Model(graph, RuntimeOptions.resolve(threads=1, memory_limit="30M"))
    with pytest.raises(
        GraphError, match=r"node pool \(MaxPool\) works in .* over the memory limit of 30\.0 MiB"
    ):
        tight.run({"x": x})
    roomy = Model(graph, RuntimeOptions.resolve(threads=1, memory_limit="256M"))
    assert [s.kernel.name for s in roomy.plan_for({"x": x}).steps] == ["pool_2d"]
    np.testing.assert_array_equal(roomy.run({"x": x})["y"], max_pool(attrs, x))
