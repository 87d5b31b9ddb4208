"""The depthwise loop called directly: every worker count splits the planes into its own runs (each
worker with its own zero-bordered buffer), strided rows are dealt into phases, and 3x3 filters take
the one-pass path; all of it against the numpy reference convolution."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.kernels.cpu.conv.depthwise import depthwise_conv_2d, depthwise_pass, fill_phases
from edgecnn.kernels.cpu.conv.depthwise_bands import BAND_FLOATS
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.ops.conv import ConvAttrs, conv
from edgecnn.testing import assert_matches


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, geometry: dict, relu6: bool) -> np.ndarray:
    out = conv(ConvAttrs(**geometry), x, w.reshape(w.shape[0], 1, *w.shape[1:]), b)
    return np.clip(out, 0.0, 6.0) if relu6 else out


def run(x: np.ndarray, w: np.ndarray, b: np.ndarray, geometry: dict, relu6: bool, workers: int) -> np.ndarray:
    (kh, kw), (sh, sw), (dh, dw) = geometry["kernel_shape"], geometry["strides"], geometry["dilations"]
    top, left, bottom, right = geometry["pads"]
    oh = (x.shape[2] + top + bottom - (kh - 1) * dh - 1) // sh + 1
    ow = (x.shape[3] + left + right - (kw - 1) * dw - 1) // sw + 1
    out = np.full((x.shape[0], w.shape[0], oh, ow), np.nan, dtype=np.float32)
    kind = 3 if relu6 else 0
    with cpu_threads(2):
        depthwise_conv_2d(
            x, w, b, True, sh, sw, top, left, dh, dw, kind, 0.0, 0.0, 6.0, BAND_FLOATS, workers, out
        )
    return out


@st.composite
def cases(draw: st.DrawFn) -> dict:
    kernel = draw(st.sampled_from([(3, 3), (3, 3), (1, 1), (5, 5), (3, 1), (2, 4)]))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    height = draw(st.integers(max(1, spans[0] - pads[0] - pads[2]), 23))
    width = draw(st.integers(max(1, spans[1] - pads[1] - pads[3]), 23))
    channels = draw(st.integers(1, 9))
    return {
        "x_shape": (draw(st.integers(1, 2)), channels, height, width),
        "out_channels": channels * draw(st.integers(1, 3)),
        "geometry": {
            "kernel_shape": kernel,
            "strides": strides,
            "dilations": dilations,
            "pads": pads,
            "group": channels,
        },
        "relu6": draw(st.booleans()),
        "workers": draw(st.integers(1, 5)),
        "seed": draw(st.integers(0, 2**16)),
    }


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_depthwise_matches_reference(case: dict) -> None:
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x_shape"], dtype=np.float32)
    kernel = case["geometry"]["kernel_shape"]
    w = rng.standard_normal((case["out_channels"], *kernel), dtype=np.float32)
    b = rng.standard_normal(case["out_channels"], dtype=np.float32)
    actual = run(x, w, b, case["geometry"], case["relu6"], case["workers"])
    expected = reference(x, w, b, case["geometry"], case["relu6"])
    magnitude = reference(np.abs(x), np.abs(w), np.abs(b), case["geometry"], False).max()
    assert_matches(actual, expected, magnitude)


def test_mobilenet_layers_on_two_workers() -> None:
    """The shapes MobileNetV2 runs (3x3, pad 1, stride 1 and 2), big enough to split across threads."""
    rng = np.random.default_rng(0)
    for channels, side, stride in [(32, 56, 1), (24, 56, 2), (64, 14, 1), (40, 7, 2)]:
        x = rng.standard_normal((1, channels, side, side), dtype=np.float32)
        w = rng.standard_normal((channels, 3, 3), dtype=np.float32)
        b = rng.standard_normal(channels, dtype=np.float32)
        geometry = {
            "kernel_shape": (3, 3),
            "strides": (stride, stride),
            "dilations": (1, 1),
            "pads": (1, 1, 1, 1),
            "group": channels,
        }
        actual = run(x, w, b, geometry, True, 2)
        assert_matches(actual, reference(x, w, b, geometry, True), 10.0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pads=st.tuples(*[st.integers(0, 2)] * 4),
    height=st.integers(1, 31),
    width=st.integers(1, 31),
    channels=st.integers(1, 6),
    multiplier=st.integers(1, 2),
    workers=st.integers(1, 3),
    relu6=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_stride_two_phases_match_reference(
    pads: tuple[int, int, int, int],
    height: int,
    width: int,
    channels: int,
    multiplier: int,
    workers: int,
    relu6: bool,
    seed: int,
) -> None:
    """3x3 at stride 2 (the four-phase path) on odd and even sizes, every padding up to 2 per side."""
    if height + pads[0] + pads[2] < 3 or width + pads[1] + pads[3] < 3:
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, channels, height, width), dtype=np.float32)
    w = rng.standard_normal((channels * multiplier, 3, 3), dtype=np.float32)
    b = rng.standard_normal(channels * multiplier, dtype=np.float32)
    geometry = {
        "kernel_shape": (3, 3),
        "strides": (2, 2),
        "dilations": (1, 1),
        "pads": pads,
        "group": channels,
    }
    actual = run(x, w, b, geometry, relu6, workers)
    magnitude = reference(np.abs(x), np.abs(w), np.abs(b), geometry, False).max()
    assert_matches(actual, reference(x, w, b, geometry, relu6), magnitude)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    height=st.integers(1, 30),
    width=st.integers(1, 30),
    channels=st.integers(1, 6),
    multiplier=st.integers(1, 2),
    batch=st.integers(1, 2),
    workers=st.integers(1, 3),
    relu6=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_same_size_planes_match_reference(
    height: int, width: int, channels: int, multiplier: int, batch: int, workers: int, relu6: bool, seed: int
) -> None:
    """3x3, stride 1, pad 1 (the unpadded one-pass path up to SAME_MAX_WIDTH wide, the padded one
    beyond): every plane edge, including 1-wide and 1-high planes."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, channels, height, width), dtype=np.float32)
    w = rng.standard_normal((channels * multiplier, 3, 3), dtype=np.float32)
    b = rng.standard_normal(channels * multiplier, dtype=np.float32)
    geometry = {"kernel_shape": (3, 3), "strides": (1, 1), "dilations": (1, 1), "pads": (1, 1, 1, 1)}
    geometry["group"] = channels
    actual = run(x, w, b, geometry, relu6, workers)
    magnitude = reference(np.abs(x), np.abs(w), np.abs(b), geometry, False).max()
    assert_matches(actual, reference(x, w, b, geometry, relu6), magnitude)


def test_writable_and_read_only_arrays_share_one_compiled_pass() -> None:
    """numba compiles again for read-only arrays: the arguments are made alike (input writable,
    constants read-only) so that kernel tests, models and read-only inputs share one version."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 6, 6), dtype=np.float32)
    w = rng.standard_normal((4, 3, 3), dtype=np.float32)
    b = rng.standard_normal(4, dtype=np.float32)
    geometry = {
        "kernel_shape": (3, 3),
        "strides": (1, 1),
        "dilations": (1, 1),
        "pads": (1, 1, 1, 1),
        "group": 4,
    }
    first = run(x, w, b, geometry, False, 1)
    for array in (x, w, b):
        array.flags.writeable = False
    np.testing.assert_array_equal(run(x, w, b, geometry, True, 2), np.clip(first, 0.0, 6.0))
    assert len(depthwise_pass((3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 6).signatures) == 1


def test_same_size_planes_keep_infinities_in_their_own_row() -> None:
    """An infinity at a row's end must not leak into the next row's first output through the masked
    left and right taps (they read the neighbouring row in the unpadded pass)."""
    x = np.zeros((1, 1, 5, 6), dtype=np.float32)
    x[0, 0, 1, 5] = np.inf  # last column of row 1
    x[0, 0, 3, 0] = -np.inf  # first column of row 3
    w = np.ones((1, 3, 3), dtype=np.float32)
    b = np.zeros(1, dtype=np.float32)
    geometry = {
        "kernel_shape": (3, 3),
        "strides": (1, 1),
        "dilations": (1, 1),
        "pads": (1, 1, 1, 1),
        "group": 1,
    }
    actual = run(x, w, b, geometry, False, 1)
    with np.errstate(invalid="ignore"):
        expected = reference(x, w, b, geometry, False)
    np.testing.assert_array_equal(actual, expected)


@settings(max_examples=80, deadline=None)
@given(
    height=st.integers(1, 20),
    width=st.integers(1, 80),
    pad_top=st.integers(0, 3),
    pad_left=st.integers(0, 3),
    rows=st.integers(1, 12),
    columns=st.integers(1, 44),
    seed=st.integers(0, 2**16),
)
def test_fill_phases_deals_the_padded_plane(
    height: int, width: int, pad_top: int, pad_left: int, rows: int, columns: int, seed: int
) -> None:
    """Every cell the phase buffer holds is the padded plane's (zero outside the plane), whatever the
    padding's parity and however the buffer cuts the plane off."""
    src = np.random.default_rng(seed).standard_normal((height, width), dtype=np.float32)
    phases = np.zeros((4, rows, columns), dtype=np.float32)
    fill_phases(src, pad_top, pad_left, phases)
    padded = np.zeros((2 * rows + height + pad_top, 2 * columns + width + pad_left), dtype=np.float32)
    padded[pad_top : pad_top + height, pad_left : pad_left + width] = src
    for phase in range(4):
        expected = padded[phase // 2 :: 2, phase % 2 :: 2][:rows, :columns]
        np.testing.assert_array_equal(phases[phase], expected)
