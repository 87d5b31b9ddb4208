"""The in-place 1x1 kernel (conv/pointwise.py) against the numpy reference: random shapes across the
micro-kernel's block edges (ROWS output channels, 16-pixel runs, an image's cut last run), chunks
and row shares on two threads, depth past one packed depth block, batches, every activation, and
the residual sum fused into its epilogue."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv import pointwise as conv_pointwise
from edgecnn.kernels.cpu.conv.pointwise import PointwiseConv, pointwise_tiles
from edgecnn.kernels.cpu.gemm.epilogue import activation_args
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS, ROWS
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.kernels.cpu.tuning_record import DEFAULT_CPU_TUNING
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.fused import ACTIVATIONS, FusedConvAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import tuned

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _layer(
    x_shape: tuple[int, ...], out_channels: int, activation: str, bias: bool, seed: int
) -> tuple[Node, list, list, np.ndarray, np.ndarray, np.ndarray | None]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = rng.standard_normal((out_channels, x_shape[1], 1, 1), dtype=np.float32)
    b = rng.standard_normal(out_channels, dtype=np.float32) if bias else None
    attrs = FusedConvAttrs(activation=activation, negative_slope=0.2, low=-0.5, high=1.5)
    inputs = ["x", "w"] if b is None else ["x", "w", "b"]
    node = Node("FusedConv", "pw", inputs, ["y"], attrs)
    types = [TensorType("float32", x_shape), TensorType("float32", w.shape)]
    values: list[np.ndarray | None] = [None, w]
    if b is not None:
        types.append(TensorType("float32", b.shape))
        values.append(b)
    return node, types, values, x, w, b


@st.composite
def layers(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "x_shape": (
            draw(st.integers(1, 3)),
            draw(st.sampled_from([1, 3, 16, 37])),
            draw(st.integers(1, 21)),
            draw(st.integers(1, 21)),
        ),
        "out_channels": draw(st.integers(1, 3 * ROWS + 1)),
        "activation": draw(st.sampled_from(ACTIVATIONS)),
        "bias": draw(st.booleans()),
        "threads": draw(st.sampled_from([1, 2])),
        "chunk_bytes": draw(st.sampled_from([64, 4096, conv_pointwise.CHUNK_BYTES])),
        "seed": draw(st.integers(0, 2**16)),
    }


def _run(case: dict[str, Any], residual: bool) -> None:
    node, types, values, x, w, b = _layer(
        case["x_shape"], case["out_channels"], case["activation"], case["bias"], case["seed"]
    )
    with (
        tuned(conv_gemm_grain=0),
        mock.patch.object(conv_pointwise, "CHUNK_BYTES", case["chunk_bytes"]),
        cpu_threads(case["threads"]),
    ):
        if residual:  # the layer as a residual block's convolution: no activation of its own
            plain = Node("FusedConv", node.name, node.inputs, node.outputs, FusedConvAttrs())
            kernel = PointwiseConv(plain, types, values)
            expected = reference_run(
                "FusedConvAdd", node.attrs, [x, w, b, z := _residual(x, w, case)], (1, 2)
            )
            actual = np.full(expected.shape, np.nan, dtype=np.float32)
            kernel.run_into_residual(actual, x, z, activation_args(node.attrs))
        else:
            kernel = PointwiseConv(node, types, values)
            expected = reference_run("FusedConv", node.attrs, [x, w, b], (1, 2))
            actual = np.full(expected.shape, np.nan, dtype=np.float32)  # every value must be written
            kernel.run_into(actual, x)
    assert_matches(actual, expected, float(x_scale(x, w)))


def _residual(x: np.ndarray, w: np.ndarray, case: dict[str, Any]) -> np.ndarray:
    shape = (x.shape[0], w.shape[0], x.shape[2], x.shape[3])
    return np.random.default_rng(case["seed"] + 1).standard_normal(shape, dtype=np.float32)


def x_scale(x: np.ndarray, w: np.ndarray) -> float:
    """Bound of |a sum of products|: the scale of float32 rounding in the comparison."""
    return float(np.abs(x).max() * np.abs(w).sum(axis=1).max() + 10.0)


@SETTINGS
@given(layers())
def test_matches_the_reference(case: dict[str, Any]) -> None:
    _run(case, residual=False)


@SETTINGS
@given(layers())
def test_fused_residual_matches_the_reference(case: dict[str, Any]) -> None:
    _run(case, residual=True)


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("depth", [255, 256, 257, 600])
def test_depth_beyond_one_packed_block(depth: int, residual: bool) -> None:
    """Depths around DEPTH_BLOCK: the second block's products are added to the first's (and to
    the residual the block starts from), the last pass finishing the block."""
    case = {
        "x_shape": (1, depth, 5, 7),
        "out_channels": ROWS + 2,
        "activation": "relu",
        "bias": True,
        "threads": 2,
        "chunk_bytes": conv_pointwise.CHUNK_BYTES,
        "seed": depth,
    }
    _run(case, residual=residual)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11, 13, 15, 16, 17, 31, 33])
def test_odd_planes(size: int) -> None:
    """Planes whose pixel count leaves a cut last run (or is a single run), 1 and 2 threads."""
    for workers in (1, 2):
        case = {
            "x_shape": (2, 5, size, size),
            "out_channels": 7,
            "activation": "clip",
            "bias": True,
            "threads": workers,
            "chunk_bytes": 256,
            "seed": size,
        }
        _run(case, residual=False)


def test_tiles_cover_the_layer_and_give_both_threads_work() -> None:
    for batch, rows, depth, pixels in [(1, 64, 16, 3025), (1, 960, 160, 49), (2, 16, 64, 9), (1, 5, 3, 1)]:
        row_step, chunk, workers = pointwise_tiles(batch, rows, depth, pixels, 2)
        assert row_step % ROWS == 0 and chunk % COLUMNS == 0
        tasks = batch * -(-pixels // chunk) * -(-rows // row_step)
        assert workers == min(2, tasks)
    # a small map with many output channels: one chunk, so the channels are split in two
    row_step, chunk, workers = pointwise_tiles(1, 960, 160, 49, 2)
    assert workers == 2 and (row_step < 960 or chunk < 49)
    # a wide map: chunks of the input bytes that stay in L2
    _, chunk, _ = pointwise_tiles(1, 64, 16, 3025, 1)
    assert chunk * 16 * 4 <= conv_pointwise.CHUNK_BYTES


def test_chosen_for_narrow_layers_only() -> None:
    """The heuristic gives it ungrouped 1x1 layers up to MAX_DEPTH channels deep, up to
    NARROW_DEPTH with at most NARROW_OUTPUTS output channels, and any depth on maps of
    DEEP_MIN_PIXELS or more."""
    from edgecnn.kernels.cpu.conv import steps as conv_kernels
    from edgecnn.kernels.cpu.system import blas
    from edgecnn.kernels.registry import select_kernel

    deep = "gemm_1x1" if blas.AVAILABLE and not conv_kernels.micro_kernel_over_blas() else "packed_gemm"
    cases = [
        (16, 64, "pointwise"),
        (DEFAULT_CPU_TUNING.pointwise_max_depth, 512, "pointwise"),
        (DEFAULT_CPU_TUNING.pointwise_max_depth + 1, 64, deep),
        (DEFAULT_CPU_TUNING.narrow_depth, DEFAULT_CPU_TUNING.narrow_outputs, "pointwise"),
        (DEFAULT_CPU_TUNING.narrow_depth + 1, 8, deep),
    ]
    for depth, outputs, expected in cases:
        # 29x29: more pixels than DEFAULT_CPU_TUNING.max_in_place_rows, so the deep cases are not the
        # pixel-row GEMM's
        node, types, values, *_ = _layer((1, depth, 29, 29), outputs, "relu", True, 0)
        assert select_kernel(node, types, values, backend="cpu").name == expected
    # the large-map rule (ResNet-50's 256 -> 64 at 56x56), but not on one pixel fewer
    for pixels, expected in (
        (DEFAULT_CPU_TUNING.deep_min_pixels, "pointwise"),
        (DEFAULT_CPU_TUNING.deep_min_pixels - 1, deep),
    ):
        node, types, values, *_ = _layer((1, 256, 1, pixels), 64, "relu", True, 0)
        assert select_kernel(node, types, values, backend="cpu").name == expected
    grouped = Node("Conv", "g", ["x", "w"], ["y"], ConvAttrs(group=2))
    types = [TensorType("float32", (1, 8, 5, 5)), TensorType("float32", (4, 4, 1, 1))]
    values = [None, np.ones((4, 4, 1, 1), np.float32)]
    assert select_kernel(grouped, types, values, backend="cpu").name != "pointwise"
