"""Fully int8 models (per-channel weights, asymmetric activations) against LiteRT's reference
kernels: data movement on the stored integers is bit-exact; arithmetic runs through
DequantizeLinear/QuantizeLinear (edgecnn rounds a float requantisation, TFLite a fixed-point one),
so those outputs may differ by one step of the output scale (docs/formats/tflite.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from importers.tflite.harness import run_both
from importers.tflite.tflite_writer import QuantParams, TfliteWriter

RNG = np.random.default_rng(3535)
IN = QuantParams([0.04], [-7])
Build = Callable[[TfliteWriter, int], tuple[int, int]]
"""Adds layers after the int8 tensor; returns (the int8 output, the number of LSBs allowed)."""
CASES: dict[str, Build] = {}


def case(fn: Build) -> Build:
    CASES[fn.__name__] = fn
    return fn


def q(scale: float, zero_point: int) -> QuantParams:
    return QuantParams([scale], [zero_point])


def int8_weights(*shape: int) -> np.ndarray:
    return RNG.integers(-127, 128, size=shape).astype(np.int8)


def conv_layer(
    w: TfliteWriter,
    x: int,
    name: str,
    c_in: int,
    c_out: int,
    shape: tuple[int, ...],
    out: QuantParams,
    activation: int = 0,
    depthwise: bool = False,
) -> int:
    """An int8 convolution with per-channel weight scales and an int32 bias on the in*w grid."""
    w_scale = list(RNG.uniform(0.004, 0.012, size=c_out))
    in_scale = w.tensors[x].quant.scale[0]  # type: ignore[union-attr]
    if depthwise:
        filters = w.const(
            f"{name}_w", int8_weights(1, 3, 3, c_out), quant=QuantParams(w_scale, [0] * c_out, 3)
        )
    else:
        filters = w.const(
            f"{name}_w", int8_weights(c_out, 3, 3, c_in), quant=QuantParams(w_scale, [0] * c_out, 0)
        )
    bias_q = QuantParams([in_scale * s for s in w_scale], [0] * c_out, 0)
    bias = w.const(f"{name}_b", RNG.integers(-2000, 2000, size=c_out).astype(np.int32), quant=bias_q)
    y = w.tensor(name, shape, "int8", out)
    if depthwise:
        w.op(
            "DEPTHWISE_CONV_2D",
            [x, filters, bias],
            [y],
            "DepthwiseConv2DOptions",
            Padding=0,
            StrideH=1,
            StrideW=1,
            DepthMultiplier=c_out // c_in,
            FusedActivationFunction=activation,
        )
    else:
        w.op(
            "CONV_2D",
            [x, filters, bias],
            [y],
            "Conv2DOptions",
            Padding=0,
            StrideH=2,
            StrideW=2,
            FusedActivationFunction=activation,
        )
    return y


@case
def conv_relu_per_channel(w: TfliteWriter, x: int) -> tuple[int, int]:
    return conv_layer(w, x, "conv", 3, 8, (1, 4, 5, 8), q(0.08, -3), activation=1), 1


@case
def conv_relu6(w: TfliteWriter, x: int) -> tuple[int, int]:
    return conv_layer(w, x, "conv", 3, 8, (1, 4, 5, 8), q(0.05, -100), activation=3), 1


@case
def depthwise_per_channel(w: TfliteWriter, x: int) -> tuple[int, int]:
    return conv_layer(w, x, "dw", 3, 6, (1, 8, 9, 6), q(0.03, 10), depthwise=True), 1


@case
def fully_connected(w: TfliteWriter, x: int) -> tuple[int, int]:
    flat = w.tensor("flat", (1, 216), "int8", IN)
    w.op(
        "RESHAPE",
        [x, w.const("shape", np.array([1, 216], np.int32))],
        [flat],
        "ReshapeOptions",
        NewShape=[1, 216],
    )
    scales = list(RNG.uniform(0.002, 0.005, size=10))
    weights = w.const("fc_w", int8_weights(10, 216), quant=QuantParams(scales, [0] * 10, 0))
    bias = w.const(
        "fc_b",
        RNG.integers(-500, 500, size=10).astype(np.int32),
        quant=QuantParams([0.04 * s for s in scales], [0] * 10, 0),
    )
    y = w.tensor("logits", (1, 10), "int8", q(0.1, 4))
    w.op("FULLY_CONNECTED", [flat, weights, bias], [y], "FullyConnectedOptions")
    return y, 1


@case
def add_different_scales(w: TfliteWriter, x: int) -> tuple[int, int]:
    other = w.const("other", RNG.integers(-128, 128, size=(1, 8, 9, 3)).astype(np.int8), quant=q(0.02, 5))
    y = w.tensor("sum", (1, 8, 9, 3), "int8", q(0.05, -2))
    w.op("ADD", [x, other], [y], "AddOptions", FusedActivationFunction=1)
    return y, 1


@case
def mul(w: TfliteWriter, x: int) -> tuple[int, int]:
    y = w.tensor("product", (1, 8, 9, 3), "int8", q(0.06, 0))
    w.op("MUL", [x, x], [y], "MulOptions")
    return y, 1


@case
def average_pool(w: TfliteWriter, x: int) -> tuple[int, int]:
    y = w.tensor("avg", (1, 4, 5, 3), "int8", IN)
    w.op(
        "AVERAGE_POOL_2D",
        [x],
        [y],
        "Pool2DOptions",
        Padding=0,
        StrideH=2,
        StrideW=2,
        FilterHeight=3,
        FilterWidth=3,
    )
    return y, 1


@case
def max_pool_exact(w: TfliteWriter, x: int) -> tuple[int, int]:
    y = w.tensor("max", (1, 4, 4, 3), "int8", IN)
    w.op(
        "MAX_POOL_2D",
        [x],
        [y],
        "Pool2DOptions",
        Padding=1,
        StrideH=2,
        StrideW=2,
        FilterHeight=2,
        FilterWidth=2,
    )
    return y, 0


@case
def data_movement_exact(w: TfliteWriter, x: int) -> tuple[int, int]:
    """Concat, pad (with the zero point), nearest resize, space-to-depth, slice, transpose, reshape."""
    cat = w.tensor("cat", (1, 8, 9, 6), "int8", IN)
    w.op("CONCATENATION", [x, x], [cat], "ConcatenationOptions", Axis=3)
    padded = w.tensor("padded", (1, 10, 10, 6), "int8", IN)
    w.op("PAD", [cat, w.const("paddings", np.array([[0, 0], [1, 1], [0, 1], [0, 0]], np.int32))], [padded])
    resized = w.tensor("resized", (1, 10, 6, 6), "int8", IN)
    w.op(
        "RESIZE_NEAREST_NEIGHBOR",
        [padded, w.const("size", np.array([10, 6], np.int32))],
        [resized],
        "ResizeNearestNeighborOptions",
    )
    deep = w.tensor("deep", (1, 4, 3, 24), "int8", IN)
    w.op("SPACE_TO_DEPTH", [w_slice(w, resized)], [deep], "SpaceToDepthOptions", BlockSize=2)
    turned = w.tensor("turned", (1, 24, 3, 4), "int8", IN)
    w.op("TRANSPOSE", [deep, w.const("perm", np.array([0, 3, 2, 1], np.int32))], [turned])
    y = w.tensor("flat", (24, 12), "int8", IN)
    w.op(
        "RESHAPE",
        [turned, w.const("shape", np.array([24, 12], np.int32))],
        [y],
        "ReshapeOptions",
        NewShape=[24, 12],
    )
    return y, 0


def w_slice(w: TfliteWriter, x: int) -> int:
    y = w.tensor("sliced", (1, 8, 6, 6), "int8", IN)
    w.op(
        "STRIDED_SLICE",
        [
            x,
            *(
                w.const(n, np.array(v, np.int32))
                for n, v in (("begin", [0, 0, 0, 0]), ("end", [1, 8, 6, 6]), ("strides", [1, 1, 1, 1]))
            ),
        ],
        [y],
        "StridedSliceOptions",
        EndMask=1,
    )
    return y


@case
def softmax(w: TfliteWriter, x: int) -> tuple[int, int]:
    y = w.tensor("probs", (1, 8, 9, 3), "int8", q(1 / 256, -128))
    w.op("SOFTMAX", [x], [y], "SoftmaxOptions", Beta=1.0)
    return y, 1


@case
def logistic(w: TfliteWriter, x: int) -> tuple[int, int]:
    y = w.tensor("sigmoid", (1, 8, 9, 3), "int8", q(1 / 256, -128))
    w.op("LOGISTIC", [x], [y])
    return y, 1


def build_int8(body: Build) -> tuple[bytes, dict[str, np.ndarray], str, int, float]:
    """float input -> QUANTIZE -> the layers -> DEQUANTIZE, with the int8 result also an output."""
    w = TfliteWriter()
    x = w.tensor("x", (1, 8, 9, 3))
    xq = w.tensor("x_int8", (1, 8, 9, 3), "int8", IN)
    w.op("QUANTIZE", [x], [xq])
    y, tolerance = body(w, xq)
    shape = w.tensors[y].shape
    real = w.tensor("y_float", shape)
    w.op("DEQUANTIZE", [y], [real])
    feeds = {"x": RNG.standard_normal((1, 8, 9, 3)).astype(np.float32) * 2}
    out_scale = w.tensors[y].quant.scale[0]  # type: ignore[union-attr]
    return w.build([x], [y, real]), feeds, w.tensors[y].name, tolerance, out_scale


@pytest.mark.parametrize("name", sorted(CASES))
def test_int8_operator_matches_litert(tmp_path: Path, name: str) -> None:
    data, feeds, int8_name, tolerance, out_scale = build_int8(CASES[name])
    expected, actual = run_both(tmp_path, data, feeds)
    want, got = expected[int8_name], actual[int8_name]
    assert got.dtype == want.dtype == np.int8
    difference = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert difference.max() <= tolerance, f"{name}: {difference.max()} LSB apart"
    if tolerance:  # one-LSB differences are rounding ties, not a different computation
        assert (difference == 0).mean() >= 0.9, f"{name}: only {(difference == 0).mean():.0%} exact"
    np.testing.assert_allclose(
        actual["y_float"], expected["y_float"], rtol=0, atol=tolerance * out_scale * 1.001
    )


def test_int8_input_model(tmp_path: Path) -> None:
    """A model whose input itself is int8 (no QUANTIZE): inputs keep their dtype and name."""
    w = TfliteWriter()
    x = w.tensor("image", (1, 6, 6, 3), "int8", IN)
    y = w.tensor("pooled", (1, 3, 3, 3), "int8", IN)
    w.op(
        "MAX_POOL_2D",
        [x],
        [y],
        "Pool2DOptions",
        Padding=1,
        StrideH=2,
        StrideW=2,
        FilterHeight=2,
        FilterWidth=2,
    )
    feeds = {"image": RNG.integers(-128, 128, size=(1, 6, 6, 3)).astype(np.int8)}
    expected, actual = run_both(tmp_path, w.build([x], [y]), feeds)
    np.testing.assert_array_equal(actual["pooled"], expected["pooled"])
