"""The pixel-row GEMM (conv/pixel_rows.py) against the numpy reference: random shapes across the
micro-kernel's block edges (ROWS pixels, COLUMNS-channel panels and a cut last panel), kernels,
strides, dilations and padding of any side, 1x1 layers read without unfolding, batches, one and two
threads, every activation, and the residual sum added as C goes back to NCHW."""

from __future__ import annotations

import ctypes
import math
import mmap
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ir.graph import Graph, Node, TensorSpec, TensorType
from edgecnn.kernels.cpu.conv.pixel_rows import RowsConv, pack_panels, rows_fit
from edgecnn.kernels.cpu.conv.setup import conv_setup
from edgecnn.kernels.cpu.gemm.epilogue import activation_args
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS, ROWS
from edgecnn.kernels.cpu.system import blas
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.kernels.cpu.tuning_record import DEFAULT_CPU_TUNING
from edgecnn.model import Model
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.fused import FusedConvAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import assert_matches, reference_run
from kernels.support import Retune, drawn_conv_layer

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def layers(draw: st.DrawFn) -> dict[str, Any]:
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    return drawn_conv_layer(draw, kernel, [1, 3, 16, 37], (11, 11, 2), 2 * COLUMNS + 3)


def _run(case: dict[str, Any], residual: bool) -> None:
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x_shape"], dtype=np.float32)
    attrs = case["attrs"]
    w_shape = (case["out_channels"], x.shape[1], *attrs.kernel_shape)
    w = rng.standard_normal(w_shape, dtype=np.float32)
    b = rng.standard_normal(w_shape[0], dtype=np.float32) if case["bias"] else None
    inputs = ["x", "w"] if b is None else ["x", "w", "b"]
    types = [TensorType("float32", x.shape), TensorType("float32", w.shape)]
    values: list[np.ndarray | None] = [None, w]
    if b is not None:
        types.append(TensorType("float32", b.shape))
        values.append(b)
    magnitude = float(np.abs(x).max() * np.abs(w).reshape(w.shape[0], -1).sum(axis=1).max() + 10.0)
    with cpu_threads(case["threads"]):
        if residual:  # a residual block's convolution: no activation of its own
            geometry = {k: getattr(attrs, k) for k in ("kernel_shape", "strides", "dilations", "pads")}
            plain = Node("FusedConv", "conv", inputs, ["y"], FusedConvAttrs(**geometry))
            kernel = RowsConv(plain, types, values)
            z = rng.standard_normal(kernel.out_shape, dtype=np.float32)
            expected = reference_run("FusedConvAdd", attrs, [x, w, b, z], (1, 2))
            actual = np.full(expected.shape, np.nan, dtype=np.float32)  # every value must be written
            kernel.run_into_residual(actual, x, z, activation_args(attrs))
            magnitude += float(np.abs(z).max())
        else:
            kernel = RowsConv(Node("FusedConv", "conv", inputs, ["y"], attrs), types, values)
            expected = reference_run("FusedConv", attrs, [x, w, b], (1, 2))
            actual = np.full(expected.shape, np.nan, dtype=np.float32)
            kernel.run_into(actual, x)
    assert_matches(actual, expected, magnitude)


@SETTINGS
@given(layers())
def test_matches_the_reference(case: dict[str, Any]) -> None:
    _run(case, residual=False)


@SETTINGS
@given(layers())
def test_fused_residual_matches_the_reference(case: dict[str, Any]) -> None:
    _run(case, residual=True)


@pytest.mark.parametrize(
    ("x_shape", "out_channels", "kernel", "stride"),
    [
        ((1, 300, 7, 7), 70, 1, 1),  # 1x1 stride 1: A read in place, 49 pixels: a cut block of 1
        ((1, 64, 14, 14), 2 * COLUMNS, 3, 2),  # ResNet's strided 3x3, 49 pixels: a cut block of 1
        ((2, 40, 9, 9), COLUMNS + 1, 3, 1),  # a panel of one channel, two images of 81 pixels
        ((1, 8, 3, 3), ROWS, 1, 1),  # 9 pixels read in place: one block and a cut one
        ((3, 16, 2, 3), ROWS, 1, 1),  # fewer pixels than one ROWS block, in three images
        ((1, 300, 13, 13), 70, 1, 2),  # 1x1 stride 2: 49 pixels gathered, then read in place
        ((2, 40, 10, 9), COLUMNS + 1, 1, 3),  # two images of 4x3 pixels gathered at stride 3
    ],
)
def test_block_edges(x_shape: tuple[int, ...], out_channels: int, kernel: int, stride: int) -> None:
    attrs = FusedConvAttrs(kernel_shape=(kernel, kernel), strides=(stride,) * 2, pads=(kernel // 2,) * 4)
    for threads in (1, 2):
        case = {"x_shape": x_shape, "out_channels": out_channels, "attrs": attrs, "bias": True}
        _run({**case, "threads": threads, "seed": threads}, residual=False)


def _guarded(shape: tuple[int, ...]) -> tuple[mmap.mmap, np.ndarray]:
    """A float32 array of ``shape`` that ends where an unreadable page begins (Linux)."""
    page = mmap.PAGESIZE
    nbytes = 4 * math.prod(shape)
    size = -(-nbytes // page) * page
    memory = mmap.mmap(-1, size + page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    assert ctypes.CDLL(None).mprotect(ctypes.c_void_p(base + size), page, 0) == 0
    return memory, np.frombuffer(memory, np.float32, math.prod(shape), size - nbytes).reshape(shape)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect through ctypes: Linux only")
@pytest.mark.parametrize("x_shape", [(1, 300, 7, 7), (2, 40, 3, 3), (1, 33, 2, 3)])
def test_in_place_read_stays_inside_the_input(x_shape: tuple[int, ...]) -> None:
    """A 1x1 layer reads A from its NCHW input in place, and a cut block at the end of the last
    channel of the last image must not read past it: the input here ends at an unreadable page, so
    a read past its end would crash the test."""
    rng = np.random.default_rng(2)
    memory, x = _guarded(x_shape)
    x[...] = rng.standard_normal(x_shape, dtype=np.float32)
    w = rng.standard_normal((COLUMNS + 5, x_shape[1], 1, 1), dtype=np.float32)
    node = Node("FusedConv", "conv", ["x", "w"], ["y"], FusedConvAttrs(kernel_shape=(1, 1)))
    kernel = RowsConv(node, [TensorType("float32", x_shape), TensorType("float32", w.shape)], [None, w])
    assert not kernel.unfold and not kernel.subsample  # A read from the input where it lies
    actual = np.full(kernel.out_shape, np.nan, dtype=np.float32)
    with cpu_threads(2):
        kernel.run_into(actual, x)
    expected = reference_run("FusedConv", FusedConvAttrs(kernel_shape=(1, 1)), [x, w, None], (1, 2))
    assert_matches(actual, expected, float(np.abs(x).max() * np.abs(w).sum(axis=1).max()))
    del x
    memory.close()


def test_panels_hold_the_filters_in_tap_then_channel_order() -> None:
    w = np.random.default_rng(0).standard_normal((COLUMNS + 3, 5, 3, 2), dtype=np.float32)
    packed = pack_panels(w).reshape(2, 3 * 2 * 5, COLUMNS)
    for o in (0, 7, COLUMNS, COLUMNS + 2):
        column = packed[o // COLUMNS, :, o % COLUMNS]
        assert np.array_equal(column, w[o].transpose(1, 2, 0).reshape(-1))
    assert not packed[1, :, 3:].any()  # the last panel's padding columns are zeros


def _setup(x_shape: tuple[int, ...], out_channels: int, kernel: int, stride: int) -> Any:
    attrs = FusedConvAttrs(kernel_shape=(kernel, kernel), strides=(stride,) * 2, pads=(kernel // 2,) * 4)
    node = Node("FusedConv", "conv", ["x", "w"], ["y"], attrs)
    w_shape = (out_channels, x_shape[1], kernel, kernel)
    return conv_setup(node, [TensorType("float32", x_shape), TensorType("float32", w_shape)])


@pytest.fixture
def micro_kernel_over_blas(retune: Retune) -> None:
    """The rule as on an AVX-512 host, the only kind it was measured on (on AVX2 hosts it is off)."""
    retune(micro_kernel_over_blas=True)


def test_heuristic_is_off_where_the_blas_tiles_take_layers(
    retune: Retune, monkeypatch: pytest.MonkeyPatch
) -> None:
    retune(micro_kernel_over_blas=False)
    monkeypatch.setattr(blas, "AVAILABLE", True)
    assert not rows_fit(_setup((1, 1024, 14, 14), 256, 1, 1))


@pytest.mark.usefixtures("micro_kernel_over_blas")
def test_heuristic_takes_deep_layers_on_small_maps() -> None:
    assert rows_fit(_setup((1, 1024, 14, 14), 256, 1, 1))  # ResNet-50's 14x14 1x1 layers
    assert rows_fit(_setup((1, 512, 14, 14), 512, 3, 2))  # its 3x3/2 into 7x7: A is 0.9 MB
    assert rows_fit(_setup((1, 512, 28, 28), 128, 1, 1))  # its 28x28 reductions, read in place
    assert rows_fit(_setup((1, 512, 28, 28), 1024, 1, 2))  # its projection into 14x14, gathered
    assert not rows_fit(_setup((1, 256, 56, 56), 512, 1, 2))  # but not the one into 28x28
    assert not rows_fit(_setup((1, 128, 56, 56), 128, 3, 2))  # nor an unfolded 28x28 layer
    assert not rows_fit(_setup((1, 64, 56, 56), 256, 1, 1))  # a large map
    assert not rows_fit(_setup((1, 128, 14, 14), 512, 1, 1))  # too shallow: K < MIN_DEPTH
    assert not rows_fit(_setup((8, 2048, 7, 7), 512, 1, 1))  # batch 8: 392 rows
    assert not rows_fit(_setup((4, 256, 14, 14), 1024, 1, 1))  # 784 rows, but not one image
    assert not rows_fit(_setup((1, 1024, 16, 16), 256, 3, 1))  # A of 256 rows x 9216 > 2 MiB
    assert DEFAULT_CPU_TUNING.max_rows >= 196  # one 14x14 map
    assert DEFAULT_CPU_TUNING.max_in_place_rows >= 784  # one 28x28 map


@pytest.mark.usefixtures("micro_kernel_over_blas")
def test_input_that_dies_at_the_layer_is_not_overwritten_while_read() -> None:
    """A 1x1 layer whose input, of the output's shape, is freed by it: the memory plan must not give
    the output the input's buffer (the kernel reads its input in place until every panel is done;
    ShuffleNetV2's 232 -> 232 layers came out wrong when the kernel said it could)."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((256, 256, 1, 1), dtype=np.float32)
    graph = Graph(
        [TensorSpec("x", "float32", (1, 256, 7, 7))],
        ["y"],
        [
            Node("Relu", "relu", ["x"], ["h"], NoAttrs()),
            Node("Conv", "conv", ["h", "w"], ["y"], ConvAttrs()),
        ],
        {"w": w},
    )
    x = rng.standard_normal((1, 256, 7, 7), dtype=np.float32)
    fast = Model(graph, RuntimeOptions.resolve(threads=2, optimize=False))
    plan = fast.plan_for({"x": x})
    assert [step.kernel.name for step in plan.steps] == ["activation", "pixel_rows"]
    assert 1 not in plan.memory.buffers.in_place
    with cpu_threads(2):
        actual = fast.run({"x": x})["y"]
    expected = Model(graph, RuntimeOptions.resolve(device="reference")).run({"x": x})["y"]
    assert_matches(actual, expected, float(np.abs(x).max() * np.abs(w).sum(axis=1).max()))
