"""The micro-kernel (microkernel.py), the packed-weight GEMM (packed_gemm.py) and the two conv
kernels built on them (conv/packed.py, conv/direct.py) against numpy: random shapes across every
block edge (ROWS, COLUMNS, the depth, row and column blocks), accumulation, and whole convolutions
with groups, strides, padding, dilation and activations on 1 and 2 threads."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv import packed as conv_packed
from edgecnn.kernels.cpu.conv.depthwise_lanes import lanes_layer
from edgecnn.kernels.cpu.conv.direct import DirectConv, fill_frame
from edgecnn.kernels.cpu.conv.gemv import whole_window
from edgecnn.kernels.cpu.conv.setup import conv_setup
from edgecnn.kernels.cpu.gemm import packed_gemm
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS, ROWS, micro_kernel
from edgecnn.kernels.cpu.gemm.packed_gemm import SCRATCH, pack_panels, pack_weights
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.ops.conv import ConvAttrs, conv
from edgecnn.ops.fused import FusedConvAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run, tuned

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@numba.njit
def _one_block(
    depth: int,
    a: np.ndarray,
    b: np.ndarray,
    ldb: int,
    c: np.ndarray,
    ldc: int,
    add: bool,
    count: int,
    width: int,
) -> None:
    micro_kernel(depth, a, 0, b, 0, ldb, c, 0, ldc, add, count, width)  # an intrinsic: compiled callers only


def test_micro_kernel_stores_or_adds_one_block() -> None:
    rng = np.random.default_rng(0)
    depth = 37
    a = rng.standard_normal((depth, ROWS), dtype=np.float32)
    b = rng.standard_normal((depth, COLUMNS + 5), dtype=np.float32)  # ldb wider than the block
    c = np.full((ROWS, COLUMNS + 3), 7.0, dtype=np.float32)
    expected = a.T.astype(np.float64) @ b[:, :COLUMNS]
    _one_block(
        depth, a.reshape(-1), b.reshape(-1), COLUMNS + 5, c.reshape(-1), COLUMNS + 3, False, ROWS, COLUMNS
    )
    np.testing.assert_allclose(c[:, :COLUMNS], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(c[:, COLUMNS:], 7.0)  # nothing past the block is written
    _one_block(
        depth, a.reshape(-1), b.reshape(-1), COLUMNS + 5, c.reshape(-1), COLUMNS + 3, True, ROWS, COLUMNS
    )
    np.testing.assert_allclose(c[:, :COLUMNS], 2 * expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("count", "width"), [(ROWS, 5), (2, COLUMNS), (1, 1), (3, COLUMNS), (4, 7), (ROWS - 1, COLUMNS - 1)]
)
def test_micro_kernel_writes_only_inside_a_cut_block(count: int, width: int) -> None:
    rng = np.random.default_rng(count * 100 + width)
    depth = 9
    a = rng.standard_normal((depth, ROWS), dtype=np.float32)
    b = rng.standard_normal((depth, COLUMNS), dtype=np.float32)
    c = np.full((ROWS, COLUMNS), 3.0, dtype=np.float32)
    expected = np.full((ROWS, COLUMNS), 3.0)
    expected[:count, :width] += (a.T.astype(np.float64) @ b)[:count, :width]
    _one_block(depth, a.reshape(-1), b.reshape(-1), COLUMNS, c.reshape(-1), COLUMNS, True, count, width)
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5)


def test_packing_layouts() -> None:
    depth = packed_gemm.DEPTH_BLOCK + 3
    rows = ROWS + 1  # one whole row block and one holding a single row
    w = np.arange(rows * depth, dtype=np.float32).reshape(rows, depth)
    packed = pack_weights(w)
    assert packed.shape == (2 * ROWS * depth,)
    first = packed[: 2 * ROWS * packed_gemm.DEPTH_BLOCK].reshape(2, packed_gemm.DEPTH_BLOCK, ROWS)
    np.testing.assert_array_equal(first[0], w[:ROWS, : packed_gemm.DEPTH_BLOCK].T)
    np.testing.assert_array_equal(first[1, :, 0], w[ROWS, : packed_gemm.DEPTH_BLOCK])
    np.testing.assert_array_equal(first[1, :, 1:], 0.0)  # the padding rows of the last block
    second = packed[2 * ROWS * packed_gemm.DEPTH_BLOCK :].reshape(2, 3, ROWS)  # the 3-step depth block
    np.testing.assert_array_equal(second[0], w[:ROWS, packed_gemm.DEPTH_BLOCK :].T)
    width = COLUMNS + 4  # one whole panel and one of 4 columns
    b = np.arange(2 * width, dtype=np.float32).reshape(2, width)
    panels = np.full(2 * 2 * COLUMNS, np.nan, dtype=np.float32)
    pack_panels(b.reshape(-1), 0, width, 2, width, panels)
    np.testing.assert_array_equal(panels[: 2 * COLUMNS].reshape(2, COLUMNS), b[:, :COLUMNS])
    tail = panels[2 * COLUMNS :].reshape(2, COLUMNS)
    np.testing.assert_array_equal(tail[:, :4], b[:, COLUMNS:])
    np.testing.assert_array_equal(tail[:, 4:], 0.0)


@SETTINGS
@given(
    rows=st.integers(1, 2 * packed_gemm.ROW_BLOCK + 7),
    depth=st.integers(1, 2 * packed_gemm.DEPTH_BLOCK + 3),
    width=st.integers(1, packed_gemm.COLUMN_BLOCK + 2 * COLUMNS + 1),
    first_block=st.integers(0, 3),
    seed=st.integers(0, 2**16),
)
def test_packed_gemm_matches_numpy(rows: int, depth: int, width: int, first_block: int, seed: int) -> None:
    """C[m0:m1] = W[m0:m1] @ B for a row range starting on a block boundary, B and C read and
    written at offsets inside wider arrays (nothing outside the range is touched)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((rows, depth), dtype=np.float32)
    b = rng.standard_normal((depth, width + 3), dtype=np.float32)
    c = np.full((rows, width + 2), np.nan, dtype=np.float32)
    m0 = min(first_block * ROWS, (rows - 1) // ROWS * ROWS)
    packed_gemm.packed_gemm(
        pack_weights(w), depth, m0, rows, b.reshape(-1), 1, width + 3, width,
        c.reshape(-1), 1, width + 2, np.empty(SCRATCH, dtype=np.float32),
    )  # fmt: skip
    expected = w[m0:].astype(np.float64) @ b[:, 1 : width + 1]
    scale = np.abs(w[m0:]).astype(np.float64) @ np.abs(b[:, 1 : width + 1])
    assert np.all(np.abs(c[m0:, 1 : width + 1] - expected) <= 1e-5 * scale + 1e-6)
    assert np.isnan(c[:m0]).all() and np.isnan(c[:, 0]).all() and np.isnan(c[:, width + 1]).all()


@st.composite
def packed_conv_cases(draw: st.DrawFn) -> dict[str, Any]:
    """Convolutions big enough to cross the GEMM's depth and column blocks, with groups, strides,
    dilation, padding, 1x1 layers and every activation."""
    group = draw(st.sampled_from([1, 1, 2, 3]))
    pointwise = draw(st.booleans())
    kernel = (1, 1) if pointwise else (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    strides = (1, 1) if pointwise else (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilations = (1, 1) if pointwise else (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = (0, 0, 0, 0) if pointwise else tuple(draw(st.integers(0, 2)) for _ in range(4))
    in_channels = group * draw(st.integers(1, 40))
    out_channels = group * draw(st.integers(1, 30))
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    height = draw(st.integers(max(1, spans[0] - pads[0] - pads[2]), 24))
    width = draw(st.integers(max(1, spans[1] - pads[1] - pads[3]), 24))
    activation = draw(st.sampled_from(["none", "relu", "leaky_relu", "clip", "sigmoid", "hard_swish"]))
    return {
        "x_shape": (draw(st.integers(1, 2)), in_channels, height, width),
        "w_shape": (out_channels, in_channels // group, *kernel),
        "geometry": {
            "kernel_shape": kernel,
            "strides": strides,
            "dilations": dilations,
            "pads": pads,
            "group": group,
        },
        "activation": activation,
        "bias": draw(st.booleans()),
        "threads": draw(st.sampled_from([1, 2])),
        "seed": draw(st.integers(0, 2**16)),
    }


def check_packed_conv(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The node planned with the packed kernel forced (as if BLAS could not be called)."""
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x_shape"], dtype=np.float32)
    w = rng.standard_normal(case["w_shape"], dtype=np.float32)
    b = rng.standard_normal(case["w_shape"][0], dtype=np.float32) if case["bias"] else None
    plain = ConvAttrs(**case["geometry"])
    if case["activation"] == "none":
        op, attrs = "Conv", plain
    else:
        op = "FusedConv"
        attrs = FusedConvAttrs(
            **case["geometry"], activation=case["activation"], negative_slope=0.1, low=0, high=6
        )
    inputs = [x, w] if b is None else [x, w, b]
    constants = tuple(range(1, len(inputs)))
    monkeypatch.setattr("edgecnn.kernels.cpu.system.blas.AVAILABLE", False)
    packed_only = tuned(
        conv_gemm_grain=0,  # small layers threaded too
        max_direct_depth=0,  # no layer to the direct kernels
        shallow_channels=0,  # shallow ones neither
        paged_channels=0,  # nor planes of whole pages
        pointwise_max_depth=0,  # nor to the in-place 1x1 kernel
        narrow_depth=0,
        deep_min_pixels=1 << 30,
        max_rows=0,  # nor to the pixel-row GEMM
        max_in_place_rows=0,
    )
    with packed_only:
        actual, kernel = fast_run(op, attrs, inputs, constants, case["threads"])
    types = [TensorType("float32", x.shape), TensorType("float32", w.shape)]
    setup = conv_setup(Node("Conv", "c", ["x", "w"], ["y"], plain), types)
    assert setup is not None
    # no tuning turns these two off
    depthwise = "depthwise_lanes" if lanes_layer(setup) else "depthwise"
    ahead = depthwise if setup.depthwise else "gemv" if whole_window(setup) else None
    assert kernel == (ahead or "packed_gemm")
    expected = reference_run(op, attrs, inputs, constants)
    magnitude = conv(plain, np.abs(x), np.abs(w), None if b is None else np.abs(b)).max()
    assert_matches(actual, expected, magnitude)


@SETTINGS
@given(packed_conv_cases())
def test_packed_conv_matches_reference(case: dict[str, Any]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        check_packed_conv(case, monkeypatch)


@SETTINGS
@given(packed_conv_cases())
def test_direct_conv_matches_reference(case: dict[str, Any]) -> None:
    """conv_direct's kernel on every geometry the heuristic might give it or `edgecnn tune` pick:
    output rows cut inside a 16-pixel run, strides that split the frame's columns, dilation."""
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x_shape"], dtype=np.float32)
    w = rng.standard_normal(case["w_shape"], dtype=np.float32)
    b = rng.standard_normal(case["w_shape"][0], dtype=np.float32) if case["bias"] else None
    actual, expected, magnitude = direct_and_reference(case, x, w, b)
    assert_matches(actual, expected, magnitude)


def direct_and_reference(
    case: dict[str, Any], x: np.ndarray, w: np.ndarray, b: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, float]:
    """The direct kernel's output, the reference's, and the magnitude their difference scales with."""
    attrs = FusedConvAttrs(
        **case["geometry"], activation=case["activation"], negative_slope=0.1, low=0, high=6
    )
    inputs = [x, w] if b is None else [x, w, b]
    node = Node("FusedConv", "conv", ["x", "w", "b"][: len(inputs)], ["y"], attrs)
    types = [TensorType("float32", value.shape) for value in inputs]
    kernel = DirectConv(node, types, [None, *inputs[1:]])
    with tuned(conv_gemm_grain=0), cpu_threads(case["threads"]):
        actual = kernel(x)
    expected = reference_run("FusedConv", attrs, inputs, tuple(range(1, len(inputs))))
    absolute = [np.nan_to_num(np.abs(value)) for value in inputs]
    magnitude = conv(
        ConvAttrs(**case["geometry"]), *absolute[:2], absolute[2] if b is not None else None
    ).max()
    return actual, expected, magnitude


@pytest.mark.parametrize("activation", ["relu", "none", "clip"])
def test_direct_conv_keeps_nan(activation: str) -> None:
    """A NaN input makes NaN outputs where the reference has them, whether the micro-kernel's stores
    finish the block (bias, ReLU) or an epilogue pass does (Clip)."""
    case = {
        "geometry": {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1), "group": 1},
        "activation": activation,
        "threads": 2,
    }
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 3, 40, 40), dtype=np.float32)
    x[0, 1, 17, 9] = np.nan
    w = rng.standard_normal((16, 3, 3, 3), dtype=np.float32)
    b = rng.standard_normal(16, dtype=np.float32)
    actual, expected, magnitude = direct_and_reference(case, x, w, b)
    assert np.isnan(expected).any()
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    finite = ~np.isnan(expected)
    assert_matches(actual[finite], expected[finite], magnitude)


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "geometry"),
    [
        ((1, 40, 34, 34), (70, 40, 3, 3), {"kernel_shape": (3, 3), "pads": (1, 1, 1, 1)}),  # depth 360
        ((1, 300, 7, 7), (130, 300, 1, 1), {"kernel_shape": (1, 1)}),  # 1x1, 2 depth blocks, row split
        ((2, 3, 41, 37), (17, 3, 7, 7), {"kernel_shape": (7, 7), "strides": (2, 2), "pads": (3, 3, 3, 3)}),
    ],
)
def test_packed_conv_on_model_sized_layers(
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    geometry: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    case = {
        "x_shape": x_shape,
        "w_shape": w_shape,
        "geometry": {**geometry, "group": 1},
        "activation": "relu",
        "bias": True,
        "threads": 2,
        "seed": 5,
    }
    check_packed_conv(case, monkeypatch)


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
@pytest.mark.parametrize(
    ("products", "rows", "pixels"), [(1, 512, 49), (1, 64, 3136), (2, 7, 5), (3, 100, 300)]
)
def test_packed_tiles_cover_the_layer(products: int, rows: int, pixels: int, threads: int) -> None:
    row_step, pixel_step, workers = conv_packed.packed_tiles(products, rows, pixels, threads)
    assert row_step % ROWS == 0 and row_step >= 1 and 1 <= pixel_step <= max(pixels, 1)
    tasks = products * -(-rows // row_step) * -(-pixels // pixel_step)
    assert 1 <= workers <= min(threads, tasks)
    if threads > 1 and products * -(-pixels // packed_gemm.COLUMN_BLOCK) < threads and rows > ROWS:
        assert tasks >= min(threads, -(-rows // ROWS))  # few pixel blocks: rows shared out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 3),  # channels
    st.integers(1, 12),  # height
    st.integers(1, 12),  # width
    st.integers(1, 3),  # stride (phases)
    st.integers(0, 3),  # pad top
    st.integers(0, 3),  # pad left
    st.integers(1, 20),  # frame rows per channel
    st.integers(1, 9),  # columns per phase
    st.data(),
)
def test_fill_frame_splits_padded_rows_by_phase(
    channels: int, height: int, width: int, phases: int, top: int, left: int, rows: int, columns: int, data
) -> None:
    """frame[c*rows + y, q, j] = padded[c, y, j*phases + q], zero outside the image, for the rows asked
    whose row in their plane lies in the window asked (the direct-rows kernel's per-worker bands)."""
    x = np.random.default_rng(0).standard_normal((1, channels, height, width)).astype(np.float32)
    padded = np.zeros((channels, top + height + rows, left + width + columns * phases), dtype=np.float32)
    padded[:, top : top + height, left : left + width] = x[0]
    expected = padded[:, :rows, : columns * phases].reshape(channels, rows, columns, phases)
    expected = expected.transpose(0, 1, 3, 2).reshape(channels * rows, phases, columns)
    first = data.draw(st.integers(0, channels * rows - 1))
    last = data.draw(st.integers(first + 1, channels * rows))
    y0 = data.draw(st.integers(0, rows))
    y1 = data.draw(st.integers(y0, rows))
    frame = np.full((channels * rows, phases, columns), np.nan, dtype=np.float32)
    fill_frame(x, top, left, first, last, y0, y1, frame)
    wanted = np.zeros(channels * rows, dtype=bool)
    wanted[first:last] = True
    wanted &= np.isin(np.arange(channels * rows) % rows, np.arange(y0, y1))
    np.testing.assert_array_equal(frame[wanted], expected[wanted])
    assert np.isnan(frame[~wanted]).all()


@pytest.mark.parametrize(
    ("shape", "geometry", "gathers"),
    [
        ((1, 8, 56, 56), {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}, True),  # 28 wide
        ((1, 8, 56, 56), {"kernel_shape": (1, 1), "strides": (2, 2)}, True),  # strided 1x1
        ((1, 8, 40, 40), {"kernel_shape": (3, 3), "pads": (0, 0, 0, 0)}, True),  # valid: narrower rows
        ((1, 8, 40, 40), {"kernel_shape": (3, 3), "pads": (1, 1, 1, 1)}, False),  # same: shifted rows
    ],
)
def test_packed_layers_gather_unless_rows_are_shifted_copies(
    shape: tuple[int, ...], geometry: dict[str, Any], gathers: bool
) -> None:
    """The packed kernel unfolds through a tap table (gather_panels) at any output width, except
    where each im2col row is one shifted copy of the plane; either way it matches the reference."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal((16, shape[1], *geometry["kernel_shape"]), dtype=np.float32)
    attrs = ConvAttrs(**geometry)
    types = [TensorType("float32", shape), TensorType("float32", w.shape)]
    kernel = conv_packed.PackedConv(Node("Conv", "c", ["x", "w"], ["y"], attrs), types, [None, w])
    assert (kernel.taps.shape[0] > 0) == gathers
    with cpu_threads(2):
        actual = kernel(x)
    expected = reference_run("Conv", attrs, [x, w], (1,))
    assert_matches(actual, expected, conv(attrs, np.abs(x), np.abs(w), None).max())
