"""Winograd F(2x2,3x3) and F(4x4,3x3) against the Conv reference kernel: the transform matrices,
random layers with hypothesis (odd sizes, any padding, channels 1..70, batch 1..3, every fused
activation, 1 and 2 threads, chunks and channel blocks cut small), the heuristic's choices.

Tolerance: float32 Winograd's error grows with the tile (the transforms' entries grow), so the
bound is relative to the magnitude of the summed terms, max(conv(|x|, |w|) + |b|), and looser for
F(4x4): measured worst errors are ~1e-7 (F(2x2)) and ~2e-6 (F(4x4)) of that magnitude
(benchmarks/winograd.py, docs/tuning.md); the bounds below leave a 7-10x margin.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu import cpu_threads
from edgecnn.kernels.cpu.conv import winograd_transforms as transforms
from edgecnn.kernels.cpu.conv.setup import conv_setup
from edgecnn.kernels.registry import scoped_registrations
from edgecnn.ops.conv import ConvAttrs, conv
from edgecnn.ops.fused import ACTIVATIONS, FusedConvAttrs
from edgecnn.testing import reference_run
from kernels.support import fast_run, tuned

ERROR_BOUND = {2: 1e-6, 4: 1.5e-5}
"""Allowed |error| / magnitude per output tile size."""


wino: Any = None
"""edgecnn.kernels.cpu.conv.winograd, imported by ``registered_winograd`` so that its kernels are
registered for this module's tests whether or not kernels/cpu/__init__.py imports it."""


def fresh_import(name: str) -> Any:
    """Import ``name`` anew, so that the registrations it makes at import happen now."""
    sys.modules.pop(name, None)
    return importlib.import_module(name)


@pytest.fixture(autouse=True, scope="module")
def registered_winograd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The Winograd kernels registered, and kernel choices by the heuristics only, whatever
    `edgecnn tune` has cached for this user."""
    global wino
    importlib.import_module("edgecnn.kernels.cpu")  # the backend's own kernels: registered for good
    with scoped_registrations(), pytest.MonkeyPatch.context() as patch:
        patch.setenv("EDGECNN_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        wino = fresh_import("edgecnn.kernels.cpu.conv.winograd")
        yield


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def correlate_3x3(d: np.ndarray, g: np.ndarray) -> np.ndarray:
    out = d.shape[0] - 2
    return np.array([[np.sum(d[i : i + 3, j : j + 3] * g) for j in range(out)] for i in range(out)])


@pytest.mark.parametrize("m", [2, 4])
def test_transform_matrices_compute_a_correlation(m: int) -> None:
    """A^T [(G g G^T) * (B^T d B)] A is the 3x3 correlation of one tile, in float64."""
    rng = np.random.default_rng(m)
    d, g = rng.standard_normal((m + 2, m + 2)), rng.standard_normal((3, 3))
    big_g, bt, at = (
        transforms.FILTER_TRANSFORMS[m],
        transforms.INPUT_TRANSFORMS[m],
        transforms.OUTPUT_TRANSFORMS[m],
    )
    y = at @ ((big_g @ g @ big_g.T) * (bt @ d @ bt.T)) @ at.T
    np.testing.assert_allclose(y, correlate_3x3(d, g), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("channels", [1, 5, 37])
def test_compiled_tile_transforms_match_the_matrices(m: int, channels: int) -> None:
    """One tile's input transform B^T d B and output transform A^T M A over channel vectors, from
    and to the strided layouts the layer loop uses, against the float64 matrices."""
    rng = np.random.default_rng(10 + m + channels)
    t = m + 2
    row = (t + 3) * channels  # a channels-last image row longer than the tile
    image = rng.standard_normal((t + 1) * row).astype(np.float32)
    base = row + 2 * channels  # the tile starts at pixel (1, 2)
    v = np.zeros((t * t, 3 * channels), dtype=np.float32)  # one row per transform point
    tmp = np.zeros(t * t * channels, dtype=np.float32)
    transforms.input_tile(m, image, base, row, channels, tmp, v.reshape(-1), channels, v.shape[1])
    d = image.reshape(t + 1, t + 3, channels)[1:, 2 : 2 + t]  # (i, j, c)
    bt = transforms.INPUT_TRANSFORMS[m]
    expected = np.einsum("ai,ijc,bj->abc", bt, d.astype(np.float64), bt)
    np.testing.assert_allclose(
        v[:, channels : 2 * channels], expected.reshape(t * t, channels), rtol=1e-5, atol=1e-4
    )
    assert not v[:, :channels].any() and not v[:, 2 * channels :].any()
    prow = 2 * channels + 1
    products = rng.standard_normal(t * t * prow).astype(np.float32)
    result = np.zeros(m * m * channels + 1, dtype=np.float32)
    transforms.output_tile(m, products, channels, prow, channels, tmp, result)
    p = products.reshape(t * t, prow)[:, channels : 2 * channels].reshape(t, t, channels)
    at = transforms.OUTPUT_TRANSFORMS[m]
    expected = np.einsum("ai,ijc,bj->abc", at, p.astype(np.float64), at)
    np.testing.assert_allclose(result[:-1], expected.reshape(-1), rtol=1e-5, atol=1e-4)
    assert result[-1] == 0


def make_layer(case: dict[str, Any]) -> tuple[str, Any, list[np.ndarray]]:
    rng = np.random.default_rng(case["seed"])
    n, c, h, w, m = case["batch"], case["in"], case["height"], case["width"], case["out"]
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    weights = rng.standard_normal((m, c, 3, 3), dtype=np.float32)
    inputs = [x, weights]
    if case["bias"]:
        inputs.append(rng.standard_normal(m, dtype=np.float32))
    activation = case["activation"]
    if activation["activation"] == "none":
        return "Conv", ConvAttrs(pads=case["pads"]), inputs
    return "FusedConv", FusedConvAttrs(pads=case["pads"], **activation), inputs


def run_winograd(op: str, attrs: Any, inputs: list[np.ndarray], m: int, threads: int) -> np.ndarray:
    """The Winograd kernel prepared as a plan would, run through ``run_into`` on ``threads``."""
    node = Node(op, "conv", [f"in{i}" for i in range(len(inputs))], ["out"], attrs)
    types = [TensorType("float32", a.shape) for a in inputs]
    values: list[np.ndarray | None] = [None, *inputs[1:]]
    assert wino.winograd_setup(node, types, values) is not None
    kernel = wino.WinogradConv(node, types, values, m)
    out = np.full(kernel.out_shape, np.nan, dtype=np.float32)
    with cpu_threads(threads):
        kernel.run_into(out, inputs[0])
        again = kernel(inputs[0])
    np.testing.assert_array_equal(out, again)
    return out


def check(case: dict[str, Any]) -> None:
    op, attrs, inputs = make_layer(case)
    expected = reference_run(op, attrs, inputs, tuple(range(1, len(inputs))))
    actual = run_winograd(op, attrs, inputs, case["tile"], case["threads"])
    bias = np.abs(inputs[2]) if len(inputs) > 2 else None
    magnitude = max(
        1.0, float(conv(ConvAttrs(pads=case["pads"]), np.abs(inputs[0]), np.abs(inputs[1]), bias).max())
    )
    assert actual.shape == expected.shape and actual.dtype == np.float32
    excess = (
        np.abs(actual.astype(np.float64) - expected)
        - 1e-4 * np.abs(expected)
        - ERROR_BOUND[case["tile"]] * magnitude
    )
    assert not np.isnan(actual).any()
    assert excess.max() <= 0, (
        f"error exceeds the F({case['tile']}x{case['tile']}) bound by {excess.max():.3g}"
    )


@st.composite
def activations(draw: st.DrawFn) -> dict[str, Any]:
    low = draw(st.floats(-2.0, 0.5))
    return {
        "activation": draw(st.sampled_from(ACTIVATIONS)),
        "negative_slope": draw(st.floats(0.0, 0.5)),
        "low": low,
        "high": low + draw(st.floats(0.1, 3.0)),
    }


@st.composite
def layers(draw: st.DrawFn) -> dict[str, Any]:
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    return {
        "batch": draw(st.integers(1, 3)),
        "in": draw(st.integers(1, 70)),
        "out": draw(st.integers(1, 70)),
        "height": draw(st.integers(max(1, 3 - pads[0] - pads[2]), 19)),
        "width": draw(st.integers(max(1, 3 - pads[1] - pads[3]), 19)),
        "pads": pads,
        "bias": draw(st.booleans()),
        "activation": draw(activations()),
        "tile": draw(st.sampled_from([2, 4])),
        "threads": draw(st.sampled_from([1, 2])),
        "seed": draw(st.integers(0, 2**16)),
    }


@SETTINGS
@given(layers())
def test_winograd_matches_reference(case: dict[str, Any]) -> None:
    check(case)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers())
def test_small_chunks_and_channel_blocks_across_threads(case: dict[str, Any]) -> None:
    """Two threads on layers cut into many tiny tasks: chunks that span images and tile rows,
    output channels split into blocks."""
    case["threads"] = 2
    with (
        tuned(gemm_grain=0),
        mock.patch.object(wino, "CHUNK_BYTES", 1),
        mock.patch.object(wino, "MIN_TILES", 1 + case["seed"] % 3),
        mock.patch.object(wino, "MIN_CHANNELS", 1),
        mock.patch.object(wino, "MIN_SPLIT_TILES", 1 + case["seed"] % 40),
        mock.patch.object(wino, "MIN_SPLIT_TILES_F43", 1 + case["seed"] % 37),
    ):
        check(case)


@pytest.mark.parametrize("size", [1, 3, 7, 13, 17, 31])
def test_odd_sizes(size: int) -> None:
    for tile in (2, 4):
        case = {
            "batch": 1,
            "in": size,
            "out": 5,
            "height": size,
            "width": size + 2,
            "pads": (1, 1, 1, 1),
            "bias": True,
            "activation": {"activation": "relu"},
            "tile": tile,
            "threads": 2,
            "seed": size,
        }
        check(case)


@pytest.mark.parametrize("activation", ["none", "relu", "leaky_relu", "clip", "silu"])
@pytest.mark.parametrize(("pads", "threads"), [((1, 1, 1, 1), 2), ((0, 0, 0, 0), 1), ((1, 0, 1, 0), 2)])
def test_planes_of_whole_pages(activation: str, pads: tuple[int, int, int, int], threads: int) -> None:
    """32x32 planes are one page each: the input moves to channels-last and (with padding 1) the
    tiles are stored in the orders kept for planes that alias in L1 (PAGE_BYTES)."""
    for tile in (2, 4):
        case = {
            "batch": 2,
            "in": 19,
            "out": 37,
            "height": 32,
            "width": 32,
            "pads": pads,
            "bias": True,
            "activation": {"activation": activation, "negative_slope": 0.2, "low": -0.5, "high": 1.0},
            "tile": tile,
            "threads": threads,
            "seed": 7,
        }
        check(case)


@pytest.mark.parametrize(("height", "width"), [(2, 512), (512, 2), (64, 48), (16, 256)])
def test_whole_page_planes_cut_by_the_tiles(height: int, width: int) -> None:
    """Planes of whole pages whose tiles, or groups of side-by-side tiles stored together, run past
    the bottom or right edge of the map (the stores clip them), on one thread and two."""
    for tile in (2, 4):
        for threads in (1, 2):
            case = {
                "batch": 1,
                "in": 5,
                "out": 9,
                "height": height,
                "width": width,
                "pads": (1, 1, 1, 1),
                "bias": True,
                "activation": {"activation": "leaky_relu", "negative_slope": 0.1},
                "tile": tile,
                "threads": threads,
                "seed": 3,
            }
            check(case)


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize(("channels", "out", "size", "batch"), [(300, 37, 9, 1), (70, 130, 11, 2)])
def test_deep_and_wide_layers_cross_the_gemm_blocks(
    channels: int, out: int, size: int, batch: int, tile: int
) -> None:
    """Input channels beyond one depth block of the micro-kernel GEMM (256), output channels that
    end inside a 16-channel filter panel, tile counts that end inside a 6-tile block."""
    case = {
        "batch": batch,
        "in": channels,
        "out": out,
        "height": size,
        "width": size + 1,
        "pads": (1, 1, 1, 1),
        "bias": True,
        "activation": {"activation": "relu"},
        "tile": tile,
        "threads": 2,
        "seed": channels + out,
    }
    with tuned(gemm_grain=0):
        check(case)


def test_f43_is_less_accurate_than_f23() -> None:
    """The documented accuracy order, on fixed seeded layers: F(4x4) rounds worse than F(2x2)."""
    errors = {2: 0.0, 4: 0.0}
    for seed in range(3):
        case = {
            "batch": 1,
            "in": 48,
            "out": 8,
            "height": 12,
            "width": 12,
            "pads": (1, 1, 1, 1),
            "bias": False,
        }
        op, attrs, inputs = make_layer({**case, "activation": {"activation": "none"}, "seed": seed})
        exact = conv(attrs, inputs[0].astype(np.float64), inputs[1].astype(np.float64))
        for tile in errors:
            errors[tile] += float(np.abs(run_winograd(op, attrs, inputs, tile, 1) - exact).max())
    assert errors[4] > 2 * errors[2]


def node_types(c: int, m: int, size: int, batch: int = 1, **attrs: Any) -> tuple[Node, list, list]:
    node = Node("Conv", "conv", ["x", "w"], ["y"], ConvAttrs(**{"pads": (1, 1, 1, 1), **attrs}))
    kernel = attrs.get("kernel_shape", (3, 3))
    group = attrs.get("group", 1)
    w = np.zeros((m, c // group, *kernel), dtype=np.float32)
    return node, [TensorType("float32", (batch, c, size, size)), TensorType("float32", w.shape)], [None, w]


@pytest.mark.parametrize(
    ("attrs", "applies"),
    [
        ({}, True),
        ({"pads": (0, 2, 1, 0)}, True),
        ({"strides": (2, 2)}, False),
        ({"dilations": (2, 2)}, False),
        ({"group": 2}, False),
        ({"kernel_shape": (5, 5)}, False),
    ],
)
def test_applies_only_to_3x3_stride_1_single_group(attrs: dict[str, Any], applies: bool) -> None:
    node, types, values = node_types(64, 64, 28, **attrs)
    assert (wino.winograd_setup(node, types, values) is not None) == applies


@pytest.mark.parametrize(
    ("c", "m", "size", "batch", "tile"),
    [
        (64, 64, 56, 1, 4),  # ResNet conv2_x
        (256, 256, 14, 1, 2),  # ResNet conv4_x: 16 tiles, but 9.4 MB of F(4x4) filters
        (512, 512, 7, 1, 0),  # ResNet conv5_x: one 7x7 map, too few tiles for the transformed filters
        (512, 512, 14, 1, 2),  # VGG conv5_2: likewise (38 MB)
        (256, 256, 14, 8, 4),  # ... and at batch 8
        (64, 24, 40, 1, 4),  # C*M/(C+M) = 17.5
        (3, 64, 112, 1, 0),  # first layer: too few input channels
        (16, 32, 56, 1, 0),  # C*M/(C+M) = 10.7: the transforms cost more than they save
        (16, 16, 28, 1, 0),
        (16, 64, 55, 1, 0),  # SqueezeNet fire2 expand3x3: GEMMs with K = 16 are too shallow
        (32, 128, 27, 1, 4),  # SqueezeNet fire4 expand3x3: 32-63 channels, 49 tiles on a small map
        (32, 64, 112, 1, 0),  # tiny-YOLO conv3: the same depth on a wide map stays on im2col
        (48, 192, 13, 1, 4),  # SqueezeNet fire6 expand3x3: 32-63 channels, 16 tiles
        (64, 256, 13, 1, 4),  # SqueezeNet fire8 expand3x3: 16 tiles of 4x4
        (160, 320, 7, 1, 0),  # GoogLeNet 5a: likewise
        (1024, 1024, 7, 1, 0),  # tiny-YOLO conv8: likewise, however wide
        (144, 288, 14, 1, 2),  # GoogLeNet 4d: 6 MB of F(4x4) filters
        (112, 224, 14, 1, 4),  # GoogLeNet 4b: 3.6 MB
        (192, 384, 7, 1, 0),  # GoogLeNet 5b: likewise
        (512, 512, 7, 3, 2),  # batch 3 of 7x7: 48 tiles of 2x2
        (96, 208, 14, 1, 4),  # GoogLeNet 4a: C*M/(C+M) = 66 on a 14x14 map
        (64, 128, 14, 1, 4),  # C*M/(C+M) = 43: past MIN_CHANNEL_RATIO
        (64, 128, 7, 1, 0),  # ... but not on one 7x7 map
        (64, 256, 7, 4, 4),  # ... at batch 4: 16 tiles of 4x4
        (96, 128, 7, 3, 2),  # batch 3 of 7x7: 12 tiles of 4x4, 48 of 2x2 (C*M/(C+M) = 55)
    ],
)
def test_heuristic(c: int, m: int, size: int, batch: int, tile: int) -> None:
    node, types, _ = node_types(c, m, size, batch)
    setup = conv_setup(node, types)
    assert setup is not None and wino.preferred_tile(setup) == tile


def test_plan_chooses_winograd_where_it_wins() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 64, 24, 24), dtype=np.float32)
    w = rng.standard_normal((64, 64, 3, 3), dtype=np.float32)
    b = rng.standard_normal(64, dtype=np.float32)
    attrs = FusedConvAttrs(pads=(1, 1, 1, 1), activation="relu")
    actual, kernel = fast_run("FusedConv", attrs, [x, w, b], (1, 2), 2)
    assert kernel == "winograd_f43"
    expected = reference_run("FusedConv", attrs, [x, w, b], (1, 2))
    magnitude = conv(ConvAttrs(pads=(1, 1, 1, 1)), np.abs(x), np.abs(w), np.abs(b)).max()
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=ERROR_BOUND[4] * magnitude)


def test_small_maps_split_tiles_for_f43_and_channels_for_f23() -> None:
    """49 tiles on two threads (ResNet's 28x28 F(4x4) and 14x14 F(2x2) layers): F(4x4) splits the
    tiles (25 + 24, all channels each), F(2x2) the output channels (all tiles each)."""
    assert wino.chunking(36, 128, 128, 49, 2) == (25, 128)
    assert wino.chunking(16, 256, 256, 49, 2) == (49, 128)
