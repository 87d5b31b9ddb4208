"""The direct kernel with pixels as rows (conv/direct_rows.py) against the numpy reference: random
shapes across its block edges (rows cut at ROWS pixels, a last panel of a few channels), kernels up
to 7x7, strides, dilations, padding of any side, batches, one and two threads, every activation
(ReLU and clip finished in the transposed stores, the others after them); its weight layout; its
rule."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.direct_rows import DirectRowsConv, when_direct_rows
from edgecnn.kernels.cpu.conv.pixel_rows import pack_panels
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS, ROWS, WIDE
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.fused import FusedConvAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import Retune, drawn_conv_layer


@st.composite
def layers(draw: st.DrawFn) -> dict[str, Any]:
    side = draw(st.sampled_from([1, 3, 5, 7]))
    kernel = (side, draw(st.sampled_from([1, 2, 3])) if side == 1 else side)
    return drawn_conv_layer(draw, kernel, [1, 3, 8, 17], (23, 41, 3), 2 * COLUMNS + 5)


def _check(case: dict[str, Any]) -> None:
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x_shape"], dtype=np.float32)
    attrs = case["attrs"]
    w = rng.standard_normal((case["out_channels"], x.shape[1], *attrs.kernel_shape), dtype=np.float32)
    b = rng.standard_normal(w.shape[0], dtype=np.float32) if case["bias"] else None
    types = [TensorType("float32", x.shape), TensorType("float32", w.shape)]
    values: list[np.ndarray | None] = [None, w]
    if b is not None:
        types.append(TensorType("float32", b.shape))
        values.append(b)
    node = Node("FusedConv", "conv", ["x", "w", "b"][: len(values)], ["y"], attrs)
    kernel = DirectRowsConv(node, types, values)
    expected = reference_run("FusedConv", attrs, [x, w, b], (1, 2))
    actual = np.full(expected.shape, np.nan, dtype=np.float32)  # every value must be written
    with cpu_threads(case["threads"]):
        kernel.run_into(actual, x)
    magnitude = float(np.abs(x).max() * np.abs(w).reshape(w.shape[0], -1).sum(axis=1).max() + 10.0)
    assert_matches(actual, expected, magnitude)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers())
def test_matches_the_reference(case: dict[str, Any]) -> None:
    _check(case)


@pytest.mark.parametrize(
    ("x_shape", "out_channels", "kernel", "stride", "activation"),
    [
        ((1, 16, 55, 55), 64, 3, 1, "relu"),  # SqueezeNet's expand layers: 7 runs of 8 per row
        ((1, 3, 29, 29), 64, 7, 2, "clip"),  # a stem: stride phases, rows of 15
        ((2, 5, 9, ROWS), COLUMNS + 1, 3, 1, "sigmoid"),  # whole runs; a panel of one channel
        ((1, 4, 6, 1), 3, 1, 1, "hard_swish"),  # one pixel per row, fewer channels than a panel
    ],
)
def test_block_edges(
    x_shape: tuple[int, ...], out_channels: int, kernel: int, stride: int, activation: str
) -> None:
    attrs = FusedConvAttrs(
        kernel_shape=(kernel, kernel), strides=(stride,) * 2, pads=(kernel // 2,) * 4, activation=activation
    )
    for threads in (1, 2):
        _check(
            {
                "x_shape": x_shape,
                "out_channels": out_channels,
                "attrs": attrs,
                "bias": True,
                "threads": threads,
                "seed": threads,
            }
        )


def test_panels_hold_the_filters_in_channel_then_tap_order() -> None:
    w = np.random.default_rng(0).standard_normal((COLUMNS + 3, 5, 3, 2), dtype=np.float32)
    packed = pack_panels(w, taps_first=False).reshape(2, 5 * 3 * 2, COLUMNS)
    for o in (0, 7, COLUMNS, COLUMNS + 2):
        assert np.array_equal(packed[o // COLUMNS, :, o % COLUMNS], w[o].reshape(-1))
    assert not packed[1, :, 3:].any()


def _takes(x_shape: tuple[int, ...], out_channels: int, kernel: int, stride: int, group: int = 1) -> bool:
    attrs = ConvAttrs(
        kernel_shape=(kernel, kernel), strides=(stride,) * 2, pads=(kernel // 2,) * 4, group=group
    )
    w = np.zeros((out_channels, x_shape[1] // group, kernel, kernel), dtype=np.float32)
    types = [TensorType("float32", x_shape), TensorType("float32", w.shape)]
    return when_direct_rows(Node("Conv", "conv", ["x", "w"], ["y"], attrs), types, [None, w])


@pytest.mark.skipif(not WIDE, reason="the examples count the lanes of AVX-512's 8 x 32 blocks")
def test_rule_takes_the_direct_kernels_layers_where_fewer_lanes_are_empty(retune: Retune) -> None:
    retune(micro_kernel_over_blas=True)
    assert _takes((1, 3, 224, 224), 64, 7, 2)  # ResNet's stem: rows of 112 fill 112 of 128 lanes
    assert _takes((1, 16, 55, 55), 64, 3, 1)  # SqueezeNet's 3x3 expand layers: 55 of 64
    assert not _takes((1, 3, 224, 224), 64, 3, 1)  # VGG's first layer: 224 fills whole runs
    assert not _takes((1, 3, 224, 224), 24, 3, 2)  # ShuffleNetV2's stem: 24 of 32 channels
    assert not _takes((1, 3, 128, 128), 16, 3, 2)  # SimpleCNN's stem: half a panel
    assert not _takes((1, 64, 56, 56), 64, 1, 1)  # 1x1: not the direct kernel's
    assert not _takes((1, 8, 56, 56), 64, 3, 2, group=2)  # grouped


@pytest.mark.skipif(not WIDE, reason="measured with AVX-512's 8 x 32 blocks only")
def test_rule_takes_shallow_layers_of_any_width(retune: Retune) -> None:
    retune(micro_kernel_over_blas=True)
    assert _takes((1, 32, 27, 27), 128, 3, 1)  # SqueezeNet's, Winograd's otherwise
    assert _takes((1, 16, 14, 14), 48, 5, 1)  # GoogLeNet's 5x5, the pixel-row GEMM's otherwise
    assert _takes((1, 32, 15, 15), 32, 3, 2)  # SimpleCNN's 8x8 output
    assert _takes((1, 63, 7, 7), 64, 3, 1)
    assert not _takes((1, 64, 56, 56), 192, 3, 1)  # 64 channels: Winograd's
    assert not _takes((1, 14, 28, 28), 64, 3, 1)  # 126 taps: too shallow, too narrow for the first case
    assert not _takes((1, 32, 27, 27), 128, 1, 1)  # 1x1
    assert not _takes((1, 32, 27, 27), 128, 3, 1, group=2)  # grouped
    retune(shallow_channels=0)
    assert not _takes((1, 32, 27, 27), 128, 3, 1)  # the rule before


@pytest.mark.skipif(not WIDE, reason="measured with AVX-512's 8 x 32 blocks only")
def test_rule_takes_64_channel_layers_on_planes_of_whole_pages(retune: Retune) -> None:
    retune(micro_kernel_over_blas=True)
    assert _takes((1, 64, 224, 224), 64, 3, 1)  # VGG-16's conv1_2: 224 x 224 x 4 bytes = 49 pages
    assert _takes((1, 64, 64, 64), 128, 3, 1)
    assert _takes((2, 64, 32, 32), 64, 3, 1)  # one page per plane, whatever the batch
    assert not _takes((1, 64, 56, 56), 64, 3, 1)  # ResNet's: 3.06 pages, Winograd's
    assert not _takes((1, 128, 64, 64), 128, 3, 1)  # deeper: Winograd tied or won
    assert not _takes((1, 64, 64, 64), 64, 1, 1)  # 1x1
    retune(paged_channels=0)
    assert not _takes((1, 64, 224, 224), 64, 3, 1)  # the rule before


def test_rule_is_off_where_the_blas_tiles_take_layers(retune: Retune) -> None:
    retune(micro_kernel_over_blas=False)
    assert not _takes((1, 16, 55, 55), 64, 3, 1)  # measured with AVX-512 only
