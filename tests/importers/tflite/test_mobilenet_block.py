"""A small MobileNet-style network (strided conv, depthwise + pointwise blocks with RELU6, average
pool, reshape, fully connected, softmax) as TFLite's converter writes it: float32, fully int8
(per-channel weights) and legacy uint8 (per-tensor weights), each against LiteRT."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from importers.tflite.harness import assert_float_match, run_both
from importers.tflite.tflite_writer import QuantParams, TfliteWriter

RELU6 = 3
CLASSES = 5


class Network:
    """Writes the same layers in float or in a quantised dtype (weights quantised from the floats)."""

    def __init__(self, dtype: str) -> None:
        self.w = TfliteWriter()
        self.dtype = dtype
        self.rng = np.random.default_rng(2024)
        self.low = -128 if dtype == "int8" else 0

    def activation(
        self, name: str, shape: tuple[int, ...], scale: float, zero_point: int | None = None
    ) -> int:
        if self.dtype == "float32":
            return self.w.tensor(name, shape)
        zero = self.low if zero_point is None else zero_point
        return self.w.tensor(name, shape, self.dtype, QuantParams([scale], [zero]))

    def weights(self, name: str, value: np.ndarray, axis: int, in_scale: float) -> tuple[int, int]:
        bias = self.rng.standard_normal(value.shape[axis]).astype(np.float32) * 0.1
        if self.dtype == "float32":
            return self.w.const(name, value), self.w.const(f"{name}_bias", bias)
        if self.dtype == "int8":  # symmetric, per output channel
            moved = np.moveaxis(value, axis, 0).reshape(value.shape[axis], -1)
            scales = np.abs(moved).max(axis=1) / 127
            shape = [1] * value.ndim
            shape[axis] = -1
            q = np.clip(np.round(value / scales.reshape(shape)), -127, 127).astype(np.int8)
            params = QuantParams(list(scales), [0] * len(scales), axis)
        else:  # uint8: asymmetric, one scale for the tensor
            scale = float(value.max() - value.min()) / 255
            zero = int(np.clip(np.round(-value.min() / scale), 0, 255))
            q = np.clip(np.round(value / scale) + zero, 0, 255).astype(np.uint8)
            scales = np.array([scale])
            params = QuantParams([scale], [zero], 0)
        bias_scales = [in_scale * float(s) for s in scales]
        bias_q = np.round(bias / np.resize(np.array(bias_scales), bias.shape)).astype(np.int32)
        bias_params = QuantParams(bias_scales, [0] * len(bias_scales), 0)
        return self.w.const(name, q, quant=params), self.w.const(f"{name}_bias", bias_q, quant=bias_params)

    def build(self) -> tuple[bytes, dict[str, np.ndarray], str]:
        w, rng = self.w, self.rng
        in_scale = 2 / 255
        x = w.tensor("input", (1, 16, 16, 3))
        body = x
        if self.dtype != "float32":
            body = self.activation(
                "input_quantized", (1, 16, 16, 3), in_scale, 0 if self.dtype == "int8" else 128
            )
            w.op("QUANTIZE", [x], [body])
        relu6_scale = 6 / 255
        filters, bias = self.weights(
            "stem", rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, 0, in_scale
        )
        stem = self.activation("stem/Relu6", (1, 8, 8, 8), relu6_scale)
        w.op(
            "CONV_2D",
            [body, filters, bias],
            [stem],
            "Conv2DOptions",
            Padding=0,
            StrideH=2,
            StrideW=2,
            FusedActivationFunction=RELU6,
        )
        current, channels, size = stem, 8, 8
        for block, (out_channels, stride) in enumerate([(16, 1), (16, 2)]):
            dw_filters, dw_bias = self.weights(
                f"dw{block}",
                rng.standard_normal((1, 3, 3, channels)).astype(np.float32) * 0.4,
                3,
                relu6_scale,
            )
            size //= stride
            dw = self.activation(f"block{block}/depthwise/Relu6", (1, size, size, channels), relu6_scale)
            w.op(
                "DEPTHWISE_CONV_2D",
                [current, dw_filters, dw_bias],
                [dw],
                "DepthwiseConv2DOptions",
                Padding=0,
                StrideH=stride,
                StrideW=stride,
                DepthMultiplier=1,
                FusedActivationFunction=RELU6,
            )
            pw_filters, pw_bias = self.weights(
                f"pw{block}",
                rng.standard_normal((out_channels, 1, 1, channels)).astype(np.float32) * 0.3,
                0,
                relu6_scale,
            )
            pw = self.activation(f"block{block}/pointwise/Relu6", (1, size, size, out_channels), relu6_scale)
            w.op(
                "CONV_2D",
                [dw, pw_filters, pw_bias],
                [pw],
                "Conv2DOptions",
                Padding=1,
                StrideH=1,
                StrideW=1,
                FusedActivationFunction=RELU6,
            )
            current, channels = pw, out_channels
        pooled = self.activation("pool/AvgPool", (1, 1, 1, channels), relu6_scale)
        w.op(
            "AVERAGE_POOL_2D",
            [current],
            [pooled],
            "Pool2DOptions",
            Padding=1,
            StrideH=size,
            StrideW=size,
            FilterHeight=size,
            FilterWidth=size,
        )
        flat = self.activation("flatten/Reshape", (1, channels), relu6_scale)
        w.op(
            "RESHAPE",
            [pooled, w.const("flat_shape", np.array([1, channels], np.int32))],
            [flat],
            "ReshapeOptions",
            NewShape=[1, channels],
        )
        fc_w, fc_b = self.weights(
            "logits", rng.standard_normal((CLASSES, channels)).astype(np.float32) * 0.5, 0, relu6_scale
        )
        logits = self.activation("logits/MatMul", (1, CLASSES), 16 / 255, 0 if self.dtype == "int8" else 128)
        w.op("FULLY_CONNECTED", [flat, fc_w, fc_b], [logits], "FullyConnectedOptions")
        probs = self.activation("probabilities", (1, CLASSES), 1 / 256)
        w.op("SOFTMAX", [logits], [probs], "SoftmaxOptions", Beta=1.0)
        image = rng.uniform(-1, 1, (1, 16, 16, 3)).astype(np.float32)
        return w.build([x], [probs]), {"input": image}, "probabilities"


def test_float_network(tmp_path: Path) -> None:
    data, feeds, _ = Network("float32").build()
    assert_float_match(*run_both(tmp_path, data, feeds))


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantized_network_within_one_step(tmp_path: Path, dtype: str) -> None:
    data, feeds, output = Network(dtype).build()
    expected, actual = run_both(tmp_path, data, feeds)
    assert actual[output].dtype == expected[output].dtype == np.dtype(dtype)
    difference = np.abs(actual[output].astype(np.int32) - expected[output].astype(np.int32))
    assert difference.max() <= 1
    assert int(np.argmax(actual[output])) == int(np.argmax(expected[output]))
