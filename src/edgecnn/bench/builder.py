"""A small ONNX network builder with seeded random weights, so the benchmark zoo can describe each
architecture in a few lines and needs no download.

Weights are He-scaled (std = sqrt(2 / fan_in)) so activations keep their scale through deep ReLU
stacks; BatchNormalization gets positive variances and gammas near 1. The builder tracks every
tensor's (channels, height, width), so flatten sizes and shuffle shapes follow any input resolution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
INPUT_NAME = "input"
OUTPUT_NAME = "output"
BATCH_DIM = "N"


@dataclass(frozen=True)
class Chw:
    """Per-sample shape of a feature map: [C, H, W], [C, L] when width = 0 (a sequence, such as a
    detector's anchors), or a flat vector [C] when height = width = 0."""

    channels: int
    height: int
    width: int


@dataclass(frozen=True)
class Scale:
    width: float = 1.0

    def ch(self, channels: int, multiple: int = 1) -> int:
        """Scaled channel count, a positive multiple of ``multiple`` (for groups and splits)."""
        return max(multiple, round(channels * self.width / multiple) * multiple)


def conv_out(size: int, kernel: int, stride: int, pad: int, ceil_mode: bool = False) -> int:
    """Output length of a convolution/pooling window sweep (ONNX rule, ceil_mode included)."""
    span = size + 2 * pad - kernel
    steps = -(-span // stride) if ceil_mode else span // stride
    if ceil_mode and steps * stride >= size + pad:  # the last window must start inside the input
        steps -= 1
    if steps < 0:
        raise ValueError(f"window {kernel} (stride {stride}, pad {pad}) does not fit a size-{size} input")
    return steps + 1


class NetBuilder:
    """Collects ONNX nodes and initializers; each layer method returns the name of its output."""

    def __init__(self, name: str, chw: Chw, seed: int) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.shapes: dict[str, Chw] = {INPUT_NAME: chw}
        self.input_chw = chw
        self._count: dict[str, int] = {}

    # ------------------------------------------------------------ plumbing
    def _name(self, kind: str) -> str:
        self._count[kind] = self._count.get(kind, 0) + 1
        return f"{kind}{self._count[kind]}"

    def const(self, stem: str, value: np.ndarray) -> str:
        name = f"{stem}_{len(self.initializers)}"
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: Sequence[str], chw: Chw, **attrs: Any) -> str:
        name = self._name(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [name], name=name, **attrs))
        self.shapes[name] = chw
        return name

    def _he(self, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        return (
            self.rng.standard_normal(shape, dtype=np.float32) * np.float32(math.sqrt(2.0 / fan_in))
        ).astype(np.float32)

    def _small(self, size: int, scale: float = 0.05) -> np.ndarray:
        return (self.rng.standard_normal(size, dtype=np.float32) * np.float32(scale)).astype(np.float32)

    # -------------------------------------------------------------- layers
    def conv(
        self,
        x: str,
        out_channels: int,
        kernel: int,
        stride: int = 1,
        pad: int = 0,
        group: int = 1,
        *,
        bn: bool = False,
        act: str | None = "relu",
    ) -> str:
        """Convolution (bias unless followed by batch norm), optional BatchNormalization and activation."""
        src = self.shapes[x]
        if src.channels % group or out_channels % group:
            raise ValueError(f"{self.name}: group {group} does not divide {src.channels} -> {out_channels}")
        fan_in = src.channels // group * kernel * kernel
        weight = self.const("w", self._he((out_channels, src.channels // group, kernel, kernel), fan_in))
        inputs = [x, weight] if bn else [x, weight, self.const("b", self._small(out_channels))]
        h = conv_out(src.height, kernel, stride, pad)
        w = conv_out(src.width, kernel, stride, pad)
        y = self.node(
            "Conv",
            inputs,
            Chw(out_channels, h, w),
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[pad] * 4,
            group=group,
        )
        if bn:
            y = self.batchnorm(y)
        return self.act(y, act)

    def batchnorm(self, x: str) -> str:
        c = self.shapes[x].channels
        gamma = self.rng.uniform(0.5, 1.0, c).astype(np.float32)
        beta = self._small(c, 0.1)
        mean = self._small(c, 0.1)
        var = self.rng.uniform(0.5, 1.5, c).astype(np.float32)
        params = [
            self.const(stem, v)
            for stem, v in (("gamma", gamma), ("beta", beta), ("mean", mean), ("var", var))
        ]
        return self.node("BatchNormalization", [x, *params], self.shapes[x], epsilon=1e-5)

    def act(self, x: str, kind: str | None) -> str:
        """relu, relu6 (Clip 0..6), leaky (slope 0.1, Darknet's), hardswish, hardsigmoid (slope 1/6,
        PyTorch's), sigmoid, silu (Sigmoid then Mul, as exporters write it), gelu (the Erf form
        exporters write below opset 20), or None for linear."""
        chw = self.shapes[x]
        if kind is None:
            return x
        if kind == "relu":
            return self.node("Relu", [x], chw)
        if kind == "relu6":
            low = self.const("clip_min", np.array(0.0, np.float32))
            high = self.const("clip_max", np.array(6.0, np.float32))
            return self.node("Clip", [x, low, high], chw)
        if kind == "leaky":
            return self.node("LeakyRelu", [x], chw, alpha=0.1)
        if kind == "hardswish":
            return self.node("HardSwish", [x], chw)
        if kind == "hardsigmoid":
            return self.node("HardSigmoid", [x], chw, alpha=1 / 6, beta=0.5)
        if kind == "sigmoid":
            return self.node("Sigmoid", [x], chw)
        if kind == "silu":
            return self.mul(x, self.node("Sigmoid", [x], chw))
        if kind == "gelu":
            root2 = self.const("sqrt2", np.array(math.sqrt(2.0), np.float32))
            one = self.const("one", np.array(1.0, np.float32))
            half = self.const("half", np.array(0.5, np.float32))
            erf = self.node("Erf", [self.node("Div", [x, root2], chw)], chw)
            return self.node("Mul", [self.mul(x, self.node("Add", [erf, one], chw)), half], chw)
        raise ValueError(f"unknown activation {kind!r}")

    def pool(self, x: str, kind: str, kernel: int, stride: int, pad: int = 0, ceil_mode: bool = False) -> str:
        src = self.shapes[x]
        h = conv_out(src.height, kernel, stride, pad, ceil_mode)
        w = conv_out(src.width, kernel, stride, pad, ceil_mode)
        op = {"max": "MaxPool", "avg": "AveragePool"}[kind]
        return self.node(
            op,
            [x],
            Chw(src.channels, h, w),
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[pad] * 4,
            ceil_mode=int(ceil_mode),
        )

    def global_pool(self, x: str) -> str:
        return self.node("GlobalAveragePool", [x], Chw(self.shapes[x].channels, 1, 1))

    def lrn(self, x: str, size: int = 5, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0) -> str:
        return self.node("LRN", [x], self.shapes[x], size=size, alpha=alpha, beta=beta, bias=bias)

    def flatten(self, x: str) -> str:
        src = self.shapes[x]
        return self.node(
            "Flatten", [x], Chw(src.channels * max(src.height, 1) * max(src.width, 1), 0, 0), axis=1
        )

    def fc(self, x: str, out_features: int, act: str | None = None) -> str:
        """Gemm with transB=1 (weights stored out x in, as Caffe and PyTorch keep them)."""
        if self.shapes[x].height:
            x = self.flatten(x)
        in_features = self.shapes[x].channels
        weight = self.const("w", self._he((out_features, in_features), in_features))
        bias = self.const("b", self._small(out_features))
        y = self.node("Gemm", [x, weight, bias], Chw(out_features, 0, 0), transB=1)
        return self.act(y, act)

    def squeeze_excite(self, x: str, squeeze: int, act: str = "relu", gate: str = "hardsigmoid") -> str:
        """x * gate(conv(act(conv(global_pool(x))))): the channel attention of MobileNetV3,
        EfficientNet, RegNetY and PP-LCNet (1x1 convs with bias, as those models export)."""
        channels = self.shapes[x].channels
        s = self.conv(self.global_pool(x), squeeze, 1, act=act)
        return self.mul(x, self.conv(s, channels, 1, act=gate))

    def mul(self, a: str, b: str) -> str:
        """Elementwise product; ``b`` may broadcast over ``a`` (a per-channel gate)."""
        return self.node("Mul", [a, b], self.shapes[a])

    def resize_nearest(self, x: str, factor: int) -> str:
        """Nearest-neighbour upsampling by an integer factor (PyTorch's nn.Upsample export)."""
        src = self.shapes[x]
        scales = self.const("scales", np.array([1.0, 1.0, factor, factor], np.float32))
        return self.node(
            "Resize",
            [x, "", scales],
            Chw(src.channels, src.height * factor, src.width * factor),
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        )

    def layernorm_channels(self, x: str, epsilon: float = 1e-6) -> str:
        """LayerNorm over the channels of an NCHW map, as ConvNeXt's LayerNorm2d exports:
        Transpose to NHWC, LayerNormalization on the last axis, Transpose back."""
        nhwc = self.node("Transpose", [x], self.shapes[x], perm=[0, 2, 3, 1])
        return self.node("Transpose", [self.layernorm_last(nhwc, epsilon)], self.shapes[x], perm=[0, 3, 1, 2])

    def layernorm_last(self, x: str, epsilon: float = 1e-6) -> str:
        """LayerNormalization over the last axis of a channels-last tensor (``shapes`` keeps its channels)."""
        c = self.shapes[x].channels
        scale = self.const("ln_scale", self.rng.uniform(0.5, 1.0, c).astype(np.float32))
        bias = self.const("ln_bias", self._small(c, 0.1))
        return self.node("LayerNormalization", [x, scale, bias], self.shapes[x], axis=-1, epsilon=epsilon)

    def linear_last(self, x: str, out_features: int) -> str:
        """MatMul + Add over the last axis of a channels-last tensor (a PyTorch Linear on NHWC)."""
        src = self.shapes[x]
        weight = self.const("w", self._he((src.channels, out_features), src.channels))
        y = self.node("MatMul", [x, weight], Chw(out_features, src.height, src.width))
        return self.node("Add", [y, self.const("b", self._small(out_features))], self.shapes[y])

    def dropout(self, x: str) -> str:
        return self.node("Dropout", [x], self.shapes[x])

    def add(self, a: str, b: str) -> str:
        if self.shapes[a] != self.shapes[b]:
            raise ValueError(f"{self.name}: Add of {self.shapes[a]} and {self.shapes[b]}")
        return self.node("Add", [a, b], self.shapes[a])

    def concat(self, xs: Sequence[str]) -> str:
        first = self.shapes[xs[0]]
        channels = sum(self.shapes[x].channels for x in xs)
        return self.node("Concat", list(xs), Chw(channels, first.height, first.width), axis=1)

    def split_channels(self, x: str, parts: int) -> list[str]:
        src = self.shapes[x]
        part = Chw(src.channels // parts, src.height, src.width)
        return self.split(x, [part.channels] * parts, 1, [part] * parts)

    def split(self, x: str, sizes: Sequence[int], axis: int, chws: Sequence[Chw]) -> list[str]:
        """ONNX Split of ``x`` into ``sizes`` along ``axis``; ``chws`` are the parts' shapes."""
        names = [self._name("split_out") for _ in sizes]
        inputs = [x, self.const("split", np.asarray(sizes, np.int64))]
        self.nodes.append(helper.make_node("Split", inputs, names, name=self._name("split"), axis=axis))
        self.shapes.update(zip(names, chws))
        return names

    def reshape(self, x: str, shape: Sequence[int], chw: Chw) -> str:
        """ONNX Reshape to ``shape`` (0 copies the input's size, -1 infers one), recorded as ``chw``."""
        return self.node("Reshape", [x, self.const("shape", np.asarray(shape, np.int64))], chw)

    def channel_shuffle(self, x: str, groups: int) -> str:
        """ShuffleNet's shuffle: (N, g, C/g, H, W) -> transpose the first two -> (N, C, H, W)."""
        src = self.shapes[x]
        grouped = self.const("shape", np.array([-1, groups, src.channels // groups, src.height, src.width]))
        flat = self.const("shape", np.array([-1, src.channels, src.height, src.width]))
        y = self.node("Reshape", [x, grouped], src)
        y = self.node("Transpose", [y], src, perm=[0, 2, 1, 3, 4])
        return self.node("Reshape", [y, flat], src)

    # ---------------------------------------------------------------- build
    def build(self, output: str) -> onnx.ModelProto:
        """The ModelProto with input ``input`` [N, C, H, W] and output ``output`` ([N, C, H, W],
        [N, C, L] or [N, C] as its Chw says)."""
        producer = next(n for n in self.nodes if output in n.output)
        producer.output[list(producer.output).index(output)] = OUTPUT_NAME
        chw = self.input_chw
        out = self.shapes[output]
        out_dims: list[int | str] = [BATCH_DIM, out.channels]
        if out.height:
            out_dims += [out.height, out.width] if out.width else [out.height]
        graph = helper.make_graph(
            self.nodes,
            self.name,
            [
                helper.make_tensor_value_info(
                    INPUT_NAME, TensorProto.FLOAT, [BATCH_DIM, chw.channels, chw.height, chw.width]
                )
            ],
            [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, out_dims)],
            self.initializers,
        )
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="edgecnn-bench"
        )
        model.ir_version = 8  # opset 17's IR version: readable by older runtimes too
        return model
