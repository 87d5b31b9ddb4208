"""The compiled im2col (kernels/cpu/conv/im2col.py) against a plain numpy unfold, over any range of output
pixels: strides, dilations, asymmetric padding, the shifted-row path taken when the output is as
wide as the input at unit strides, and the tap-table gather of layers with narrow outputs."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.kernels.cpu.conv.im2col import gather_rows, gathers_columns, im2col_2d, im2col_range, tap_table
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS
from edgecnn.kernels.cpu.gemm.packed_gemm import gather_panels


def unfold(
    image: np.ndarray,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, ...],
    dilations: tuple[int, int],
    out: tuple[int, int],
) -> np.ndarray:
    """(C*KH*KW, OH*OW): row (c, i, j) holds input[c, oy*sh - top + i*dh, ox*sw - left + j*dw] (0 outside)."""
    c, h, w = image.shape
    top, left, bottom, right = pads
    padded = np.zeros((c, h + top + bottom + 64, w + left + right + 64), dtype=image.dtype)
    padded[:, top : top + h, left : left + w] = image
    rows = []
    for ci in range(c):
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                ys = np.arange(out[0]) * strides[0] + i * dilations[0]
                xs = np.arange(out[1]) * strides[1] + j * dilations[1]
                rows.append(padded[ci][np.ix_(ys, xs)].reshape(-1))
    return np.stack(rows)


@st.composite
def layers(draw: st.DrawFn) -> dict:
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    strides = draw(st.sampled_from([(1, 1), (1, 1), (2, 2), (1, 2), (3, 1)]))
    dilations = draw(st.sampled_from([(1, 1), (1, 1), (2, 1), (2, 3)]))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    if draw(st.booleans()):  # SAME-like: as wide as the input at unit strides (the shifted-row path)
        strides = (1, 1)
        span = (kernel[1] - 1) * dilations[1]
        left = draw(st.integers(0, span))
        pads = (pads[0], left, pads[2], span - left)
    h, w = draw(st.integers(1, 13)), draw(st.integers(1, 13))
    oh = (h + pads[0] + pads[2] - (kernel[0] - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - (kernel[1] - 1) * dilations[1] - 1) // strides[1] + 1
    if oh < 1 or ow < 1:
        oh, ow, pads = h, w, (0, 0, 0, 0)
        kernel, strides, dilations = (1, 1), (1, 1), (1, 1)
    p0 = draw(st.integers(0, oh * ow - 1))
    p1 = draw(st.integers(p0 + 1, oh * ow))
    return {
        "c": draw(st.integers(1, 3)),
        "h": h,
        "w": w,
        "kernel": kernel,
        "strides": strides,
        "dilations": dilations,
        "pads": pads,
        "out": (oh, ow),
        "range": (p0, p1),
    }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers())
def test_im2col_range_matches_the_unfold(layer: dict) -> None:
    rng = np.random.default_rng(0)
    image = rng.standard_normal((layer["c"], layer["h"], layer["w"])).astype(np.float32)
    expected = unfold(
        image, layer["kernel"], layer["strides"], layer["pads"], layer["dilations"], layer["out"]
    )
    p0, p1 = layer["range"]
    dest = np.full((expected.shape[0], p1 - p0 + 3), np.nan, dtype=np.float32)
    kh, kw = layer["kernel"]
    im2col_range(
        image,
        kh,
        kw,
        *layer["strides"],
        layer["pads"][0],
        layer["pads"][1],
        *layer["dilations"],
        layer["out"][1],
        p0,
        p1,
        dest,
    )
    np.testing.assert_array_equal(dest[:, : p1 - p0], expected[:, p0:p1])
    assert np.isnan(dest[:, p1 - p0 :]).all()  # nothing written past the range


def test_whole_matrix_in_parallel_blocks() -> None:
    rng = np.random.default_rng(1)
    image = rng.standard_normal((4, 17, 19)).astype(np.float32)
    expected = unfold(image, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), (17, 19))
    columns = np.empty_like(expected)
    im2col_2d(image, 3, 3, 1, 1, 1, 1, 1, 1, 17, 19, columns, 3)
    np.testing.assert_array_equal(columns, expected)


def unfolded_with_taps(layer: dict, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random image for ``layer``, its im2col matrix from the reference unfold, and its tap table."""
    image = np.random.default_rng(seed).standard_normal((layer["c"], layer["h"], layer["w"]))
    image = image.astype(np.float32)
    expected = unfold(
        image, layer["kernel"], layer["strides"], layer["pads"], layer["dilations"], layer["out"]
    )
    taps = tap_table(
        layer["h"], layer["w"], layer["kernel"], layer["strides"], layer["pads"][:2], layer["dilations"],
        layer["out"],
    )  # fmt: skip
    return image, expected, taps


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers())
def test_gather_through_the_tap_table_matches_the_unfold(layer: dict) -> None:
    image, expected, taps = unfolded_with_taps(layer, seed=2)
    p0, p1 = layer["range"]
    assert taps.shape == (layer["kernel"][0] * layer["kernel"][1], layer["out"][0] * layer["out"][1])
    rows = expected.shape[0]
    for r0, r1 in ((0, rows), (rows // 3, rows - rows // 4)):  # the whole matrix, a block of its rows
        dest = np.full((r1 - r0, p1 - p0 + 3), np.nan, dtype=np.float32)
        gather_rows(image, taps, r0, r1, p0, p1, dest)
        np.testing.assert_array_equal(dest[:, : p1 - p0], expected[r0:r1, p0:p1])
        assert np.isnan(dest[:, p1 - p0 :]).all()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers())
def test_gather_into_panels_matches_the_unfold(layer: dict) -> None:
    """gather_panels writes pack_panels' layout of the unfold's rows and columns: each COLUMNS-wide
    panel depth-major, the last one zero-padded, nothing past the panels touched."""
    image, expected, taps = unfolded_with_taps(layer, seed=3)
    p0, p1 = layer["range"]
    rows = expected.shape[0]
    span = p1 - p0
    count = -(-span // COLUMNS)
    for r0, r1 in ((0, rows), (rows // 3, rows - rows // 4)):
        steps = r1 - r0
        panels = np.full(count * COLUMNS * steps + 5, np.nan, dtype=np.float32)
        gather_panels(image, taps, r0, r1, p0, p1, panels)
        block = np.zeros((steps, count * COLUMNS), dtype=np.float32)
        block[:, :span] = expected[r0:r1, p0:p1]
        want = block.reshape(steps, count, COLUMNS).transpose(1, 0, 2).reshape(-1)
        np.testing.assert_array_equal(panels[: want.size], want)
        assert np.isnan(panels[want.size :]).all()


def test_which_layers_gather() -> None:
    assert gathers_columns(15, (2, 2), (8, 8))  # SimpleCNN's 32->32 3x3/2
    assert gathers_columns(14, (1, 1), (10, 10))  # LeNet's 5x5 without padding
    assert not gathers_columns(13, (1, 1), (13, 13))  # SAME: one shifted copy per row
    assert not gathers_columns(56, (2, 2), (28, 28))  # wide rows: the segments are long enough
