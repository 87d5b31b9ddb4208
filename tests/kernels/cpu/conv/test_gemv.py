"""The GEMV convolution (conv/gemv.py) against the numpy reference: random whole-window layers
(1x1 on 1x1 maps and windows as large as their input) across the panel edges, odd channel counts,
every activation, batches of 1 to 9 (groups of four images and the rest), one and two threads with
the serial and the parallel build; which layers the rule takes; and a real squeeze-and-excitation
network against onnxruntime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgecnn
from edgecnn.bench.zoo import build_model
from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.gemv import PANEL, GemvConv, pack_gemv_weights
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.fused import ACTIVATIONS, FusedConvAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import Retune, fast_run, tuned
from onnx_support import run_onnxruntime

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _run(
    x_shape: tuple[int, ...], out_channels: int, activation: str, bias: bool, threads: int, seed: int
) -> GemvConv:
    """One layer through the kernel and the reference (its window: the input's map); returns it."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = rng.standard_normal((out_channels, *x_shape[1:]), dtype=np.float32)
    b = rng.standard_normal(out_channels, dtype=np.float32) if bias else None
    attrs = FusedConvAttrs(
        kernel_shape=x_shape[2:], activation=activation, negative_slope=0.2, low=-0.5, high=1.5
    )
    inputs = ["x", "w"] if b is None else ["x", "w", "b"]
    types = [TensorType("float32", x.shape), TensorType("float32", w.shape)]
    values: list[np.ndarray | None] = [None, w]
    if b is not None:
        types.append(TensorType("float32", b.shape))
        values.append(b)
    kernel = GemvConv(Node("FusedConv", "conv", inputs, ["y"], attrs), types, values)
    expected = reference_run("FusedConv", attrs, [x, w, b], (1, 2))
    actual = np.full(expected.shape, np.nan, dtype=np.float32)  # every value must be written
    with cpu_threads(threads):
        kernel.run_into(actual, x)
    magnitude = float(
        np.abs(x).reshape(x.shape[0], -1).max() * np.abs(w).reshape(out_channels, -1).sum(1).max()
    )
    assert_matches(actual, expected, magnitude + (float(np.abs(b).max()) if b is not None else 0.0))
    return kernel


@st.composite
def layers(draw: st.DrawFn) -> dict[str, Any]:
    window = draw(st.sampled_from([(1, 1), (1, 1), (2, 3), (3, 3)]))
    return {
        "x_shape": (draw(st.integers(1, 9)), draw(st.integers(1, 2 * PANEL + 5)), *window),
        "out_channels": draw(st.integers(1, 2 * PANEL + 3)),
        "activation": draw(st.sampled_from(ACTIVATIONS)),
        "bias": draw(st.booleans()),
        "threads": draw(st.sampled_from([1, 2])),
        "seed": draw(st.integers(0, 2**16)),
    }


@SETTINGS
@given(layers(), st.booleans())
def test_matches_the_reference(case: dict[str, Any], parallel: bool) -> None:
    with tuned(conv_gemm_grain=0 if parallel else 1 << 40):  # the parallel build, or the serial one
        kernel = _run(**case)
    assert kernel.small == (not parallel)


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("batch", [1, 6])
def test_every_activation_on_odd_channels(activation: str, batch: int, retune: Retune) -> None:
    """Odd depths (a remainder after the four-value steps) and a cut last panel, on two threads;
    one image, and a group of four images then two alone."""
    retune(conv_gemm_grain=0)
    _run((batch, 4 * 37 + 3, 1, 1), PANEL + 7, activation, True, 2, batch)


def test_panels_hold_each_channel_depth_major() -> None:
    """Full panels PANEL wide, the last one as wide as its channels, then PANEL zeros."""
    w = np.random.default_rng(0).standard_normal((PANEL + 3, 7), dtype=np.float32)
    packed = pack_gemv_weights(w)
    assert packed.size == w.size + PANEL and not packed[w.size :].any()
    first, last = packed[: 7 * PANEL].reshape(7, PANEL), packed[7 * PANEL : w.size].reshape(7, 3)
    for channel in (0, 5, PANEL - 1):
        assert np.array_equal(first[:, channel], w[channel])
    for channel in (PANEL, PANEL + 2):
        assert np.array_equal(last[:, channel - PANEL], w[channel])


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs", "kernel"),
    [
        ((1, 48, 1, 1), (1152, 48, 1, 1), ConvAttrs(), "gemv"),  # an SE excite layer
        ((2, 9, 3, 4), (5, 9, 3, 4), ConvAttrs(), "gemv"),  # a window as large as the map
        ((1, 9, 3, 3), (5, 9, 3, 3), ConvAttrs(strides=(2, 2)), "gemv"),  # strides change nothing
        ((1, 9, 2, 2), (5, 9, 1, 1), ConvAttrs(), None),  # a 2x2 output map
        ((1, 9, 1, 1), (5, 9, 3, 3), ConvAttrs(pads=(1, 1, 1, 1)), None),  # padded
        ((1, 8, 1, 1), (8, 4, 1, 1), ConvAttrs(group=2), None),  # grouped
    ],
)
def test_rule_takes_whole_window_layers_only(
    x_shape: tuple[int, ...], w_shape: tuple[int, ...], attrs: ConvAttrs, kernel: str | None
) -> None:
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(x_shape, dtype=np.float32), rng.standard_normal(w_shape, dtype=np.float32)
    out, name = fast_run("Conv", attrs, [x, w], (1,), 1)
    assert (name == "gemv") == (kernel == "gemv"), name
    assert_matches(
        out, reference_run("Conv", attrs, [x, w], (1,)), float(np.abs(w).sum(axis=(1, 2, 3)).max() * 5)
    )


@pytest.mark.parametrize("batch", [1, 5])
def test_efficientnet_matches_onnxruntime(tmp_path: Path, batch: int) -> None:
    """EfficientNet-B0 (width 0.25, 64x64): every SE block's squeeze and excite layers run here (SiLU
    and the Sigmoid gate fused), and the network's output stays onnxruntime's."""
    model = build_model("efficientnet-b0", width=0.25, resolution=64)
    path = tmp_path / "efficientnet.onnx"
    onnx.save(model, str(path))
    net = edgecnn.load(str(path), threads=2)
    x = np.random.default_rng(batch).standard_normal((batch, 3, 64, 64), dtype=np.float32)
    (name,) = [i.name for i in net.inputs]
    steps = net.plan_for({name: x}).steps
    gemv = [s for s in steps if s.kernel.name == "gemv"]
    assert len(gemv) == 2 * 16 and {s.node.attrs.activation for s in gemv} == {"silu", "sigmoid"}
    (expected,) = run_onnxruntime(model, {name: x})
    assert_matches(net(x), expected, 1.0)
