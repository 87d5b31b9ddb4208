"""Every mapped float operator, in a small written model, against LiteRT's reference kernels."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from importers.tflite.harness import assert_float_match, run_both
from importers.tflite.tflite_writer import TfliteWriter

RNG = np.random.default_rng(35)
Case = Callable[[], tuple[bytes, dict[str, np.ndarray]]]
CASES: dict[str, Case] = {}


def case(fn: Case) -> Case:
    CASES[fn.__name__] = fn
    return fn


def normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def filters_out(w: TfliteWriter, filters: int) -> int:
    return w.tensors[filters].shape[0]


def single(
    opcode: str,
    in_shape: tuple[int, ...],
    out_shape: tuple[int, ...],
    options_type: str | None = None,
    consts: tuple[np.ndarray, ...] = (),
    **options: object,
) -> tuple[bytes, dict[str, np.ndarray]]:
    """One operator reading an input and some constants."""
    w = TfliteWriter()
    x = w.tensor("x", in_shape)
    args = [x] + [w.const(f"c{i}", c) for i, c in enumerate(consts)]
    y = w.tensor("y", out_shape)
    w.op(opcode, args, [y], options_type, **options)
    return w.build([x], [y]), {"x": normal(*in_shape)}


def after_conv(
    opcode: str,
    out_shape: tuple[int, ...],
    options_type: str | None = None,
    consts: tuple[np.ndarray, ...] = (),
    **options: object,
) -> tuple[bytes, dict[str, np.ndarray]]:
    """A 1x1 convolution, then the operator: it reads an NCHW-held tensor, so axis remapping runs."""
    w = TfliteWriter()
    x = w.tensor("x", (1, 5, 6, 4))
    filters = w.const("filters", normal(4, 1, 1, 4))
    hidden = w.tensor("hidden", (1, 5, 6, 4))
    w.op(
        "CONV_2D",
        [x, filters, w.const("bias", normal(filters_out(w, filters)))],
        [hidden],
        "Conv2DOptions",
        Padding=1,
        StrideH=1,
        StrideW=1,
    )
    args = [hidden] + [w.const(f"c{i}", c) for i, c in enumerate(consts)]
    y = w.tensor("y", out_shape)
    w.op(opcode, args, [y], options_type, **options)
    return w.build([x], [y]), {"x": normal(1, 5, 6, 4)}


@case
def conv_same_stride2_relu() -> tuple[bytes, dict[str, np.ndarray]]:
    return single(
        "CONV_2D",
        (1, 9, 10, 3),
        (1, 5, 5, 4),
        "Conv2DOptions",
        (normal(4, 3, 3, 3), normal(4)),
        Padding=0,
        StrideH=2,
        StrideW=2,
        FusedActivationFunction=1,
    )


@case
def conv_valid_dilated_relu6() -> tuple[bytes, dict[str, np.ndarray]]:
    return single(
        "CONV_2D",
        (1, 11, 9, 2),
        (1, 7, 5, 3),
        "Conv2DOptions",
        (normal(3, 3, 3, 2), normal(3)),
        Padding=1,
        StrideH=1,
        StrideW=1,
        DilationHFactor=2,
        DilationWFactor=2,
        FusedActivationFunction=3,
    )


@case
def conv_grouped_same_even_kernel() -> tuple[bytes, dict[str, np.ndarray]]:
    return single(
        "CONV_2D",
        (1, 7, 8, 4),
        (1, 7, 8, 6),
        "Conv2DOptions",
        (normal(6, 2, 4, 2), normal(6)),
        Padding=0,
        StrideH=1,
        StrideW=1,
    )


@case
def depthwise_multiplier2_same() -> tuple[bytes, dict[str, np.ndarray]]:
    return single(
        "DEPTHWISE_CONV_2D",
        (1, 8, 7, 3),
        (1, 4, 4, 6),
        "DepthwiseConv2DOptions",
        (normal(1, 3, 3, 6), normal(6)),
        Padding=0,
        StrideH=2,
        StrideW=2,
        DepthMultiplier=2,
        FusedActivationFunction=2,
    )


@case
def transpose_conv_same() -> tuple[bytes, dict[str, np.ndarray]]:
    w = TfliteWriter()
    x = w.tensor("x", (1, 4, 5, 3))
    shape = w.const("shape", np.array([1, 8, 10, 2], np.int32))
    filters = w.const("filters", normal(2, 3, 3, 3))
    bias = w.const("bias", normal(2))
    y = w.tensor("y", (1, 8, 10, 2))
    w.op(
        "TRANSPOSE_CONV",
        [shape, filters, x, bias],
        [y],
        "TransposeConvOptions",
        Padding=0,
        StrideH=2,
        StrideW=2,
    )
    return w.build([x], [y]), {"x": normal(1, 4, 5, 3)}


@case
def transpose_conv_valid() -> tuple[bytes, dict[str, np.ndarray]]:
    w = TfliteWriter()
    x = w.tensor("x", (1, 3, 3, 2))
    shape = w.const("shape", np.array([1, 7, 8, 4], np.int32))
    filters = w.const("filters", normal(4, 3, 4, 2))
    y = w.tensor("y", (1, 7, 8, 4))
    w.op("TRANSPOSE_CONV", [shape, filters, x], [y], "TransposeConvOptions", Padding=1, StrideH=2, StrideW=2)
    return w.build([x], [y]), {"x": normal(1, 3, 3, 2)}


@case
def fully_connected_flattening() -> tuple[bytes, dict[str, np.ndarray]]:
    return single(
        "FULLY_CONNECTED",
        (1, 3, 2, 4),
        (1, 5),
        "FullyConnectedOptions",
        (normal(5, 24), normal(5)),
        FusedActivationFunction=1,
    )


@case
def fully_connected_keep_dims() -> tuple[bytes, dict[str, np.ndarray]]:
    return single(
        "FULLY_CONNECTED", (2, 3, 6), (2, 3, 4), "FullyConnectedOptions", (normal(4, 6),), KeepNumDims=True
    )


@case
def average_pool_same() -> tuple[bytes, dict[str, np.ndarray]]:
    return single(
        "AVERAGE_POOL_2D",
        (1, 7, 9, 3),
        (1, 4, 5, 3),
        "Pool2DOptions",
        Padding=0,
        StrideH=2,
        StrideW=2,
        FilterHeight=3,
        FilterWidth=3,
    )


@case
def max_pool_valid_relu() -> tuple[bytes, dict[str, np.ndarray]]:
    return single(
        "MAX_POOL_2D",
        (1, 7, 9, 3),
        (1, 3, 4, 3),
        "Pool2DOptions",
        Padding=1,
        StrideH=2,
        StrideW=2,
        FilterHeight=2,
        FilterWidth=2,
        FusedActivationFunction=1,
    )


@case
def mean_spatial_keepdims() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv("MEAN", (1, 1, 1, 4), "ReducerOptions", (np.array([1, 2], np.int32),), KeepDims=True)


@case
def mean_spatial_dropped() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv("MEAN", (1, 4), "ReducerOptions", (np.array([1, 2], np.int32),), KeepDims=False)


@case
def mean_height_dropped() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv("MEAN", (1, 6, 4), "ReducerOptions", (np.array([1], np.int32),), KeepDims=False)


def _binary(
    opcode: str, options_type: str, constant: np.ndarray, activation: int
) -> tuple[bytes, dict[str, np.ndarray]]:
    w = TfliteWriter()
    x = w.tensor("x", (1, 5, 6, 4))
    filters = w.const("filters", normal(4, 1, 1, 4))
    hidden = w.tensor("hidden", (1, 5, 6, 4))
    w.op(
        "CONV_2D",
        [x, filters, w.const("bias", normal(filters_out(w, filters)))],
        [hidden],
        "Conv2DOptions",
        Padding=1,
        StrideH=1,
        StrideW=1,
    )
    summed = w.tensor("summed", (1, 5, 6, 4))
    w.op(opcode, [hidden, x], [summed], options_type, FusedActivationFunction=activation)
    y = w.tensor("y", (1, 5, 6, 4))
    w.op(opcode, [summed, w.const("c", constant)], [y], options_type)
    return w.build([x], [y]), {"x": normal(1, 5, 6, 4)}


@case
def add_relu_and_channel_constant() -> tuple[bytes, dict[str, np.ndarray]]:
    return _binary("ADD", "AddOptions", normal(4), 1)


@case
def sub_relu6_and_full_constant() -> tuple[bytes, dict[str, np.ndarray]]:
    return _binary("SUB", "SubOptions", normal(1, 5, 6, 4), 3)


@case
def mul_fused_tanh_clamps_nothing_and_scalar() -> tuple[bytes, dict[str, np.ndarray]]:
    return _binary("MUL", "MulOptions", np.float32(1.5), 4)


@case
def div_by_row_constant() -> tuple[bytes, dict[str, np.ndarray]]:
    return _binary("DIV", "DivOptions", (np.abs(normal(6, 4)) + 0.5).astype(np.float32), 2)


@pytest.mark.parametrize(
    "opcode", ["RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LOGISTIC", "TANH", "HARD_SWISH"]
)
def test_activation(tmp_path: Path, opcode: str) -> None:
    data, feeds = after_conv(opcode, (1, 5, 6, 4))
    feeds["x"] *= 4
    assert_float_match(*run_both(tmp_path, data, feeds))


@case
def leaky_relu() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv("LEAKY_RELU", (1, 5, 6, 4), "LeakyReluOptions", Alpha=0.2)


@case
def prelu_channel_alpha() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv("PRELU", (1, 5, 6, 4), None, (normal(1, 1, 4),))


@case
def softmax_beta_on_channels() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv("SOFTMAX", (1, 5, 6, 4), "SoftmaxOptions", Beta=0.7)


@case
def softmax_2d() -> tuple[bytes, dict[str, np.ndarray]]:
    return single("SOFTMAX", (3, 10), (3, 10), "SoftmaxOptions", Beta=1.0)


@case
def log_softmax() -> tuple[bytes, dict[str, np.ndarray]]:
    return single("LOG_SOFTMAX", (2, 7), (2, 7))


@case
def l2_normalization_channels() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv("L2_NORMALIZATION", (1, 5, 6, 4), "L2NormOptions")


@case
def concatenation_channels() -> tuple[bytes, dict[str, np.ndarray]]:
    w = TfliteWriter()
    x = w.tensor("x", (1, 5, 6, 4))
    filters = w.const("filters", normal(3, 1, 1, 4))
    hidden = w.tensor("hidden", (1, 5, 6, 3))
    w.op(
        "CONV_2D",
        [x, filters, w.const("bias", normal(filters_out(w, filters)))],
        [hidden],
        "Conv2DOptions",
        Padding=1,
        StrideH=1,
        StrideW=1,
    )
    y = w.tensor("y", (1, 5, 6, 7))
    w.op("CONCATENATION", [hidden, x], [y], "ConcatenationOptions", Axis=-1)
    return w.build([x], [y]), {"x": normal(1, 5, 6, 4)}


@case
def concatenation_width() -> tuple[bytes, dict[str, np.ndarray]]:
    w = TfliteWriter()
    x = w.tensor("x", (1, 5, 6, 4))
    y = w.tensor("y", (1, 5, 9, 4))
    w.op("CONCATENATION", [x, w.const("c", normal(1, 5, 3, 4))], [y], "ConcatenationOptions", Axis=2)
    return w.build([x], [y]), {"x": normal(1, 5, 6, 4)}


@case
def reshape_after_conv() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv(
        "RESHAPE", (1, 30, 4), "ReshapeOptions", (np.array([1, 30, 4], np.int32),), NewShape=[1, 30, 4]
    )


@case
def squeeze() -> tuple[bytes, dict[str, np.ndarray]]:
    return single("SQUEEZE", (1, 3, 1, 5), (3, 5), "SqueezeOptions", SqueezeDims=[0, 2])


@case
def transpose_after_conv() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv("TRANSPOSE", (4, 6, 1, 5), None, (np.array([3, 2, 0, 1], np.int32),))


@case
def pad_channels_and_space() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv("PAD", (1, 8, 7, 6), None, (np.array([[0, 0], [1, 2], [0, 1], [2, 0]], np.int32),))


@case
def padv2_value() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv(
        "PADV2",
        (1, 7, 8, 4),
        None,
        (np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32), np.array([-0.5], np.float32)),
    )


@case
def mirror_pad_reflect() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv(
        "MIRROR_PAD",
        (1, 9, 8, 4),
        "MirrorPadOptions",
        (np.array([[0, 0], [2, 2], [1, 1], [0, 0]], np.int32),),
        Mode=0,
    )


@pytest.mark.parametrize("opcode", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
@pytest.mark.parametrize("align, half", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("size", [(11, 13), (3, 4)])
def test_resize(tmp_path: Path, opcode: str, align: bool, half: bool, size: tuple[int, int]) -> None:
    options_type = "ResizeBilinearOptions" if opcode == "RESIZE_BILINEAR" else "ResizeNearestNeighborOptions"
    data, feeds = after_conv(
        opcode,
        (1, *size, 4),
        options_type,
        (np.array(size, np.int32),),
        AlignCorners=align,
        HalfPixelCenters=half,
    )
    assert_float_match(*run_both(tmp_path, data, feeds))


@case
def space_to_depth() -> tuple[bytes, dict[str, np.ndarray]]:
    w = TfliteWriter()
    x = w.tensor("x", (1, 6, 4, 3))
    y = w.tensor("y", (1, 3, 2, 12))
    w.op("SPACE_TO_DEPTH", [x], [y], "SpaceToDepthOptions", BlockSize=2)
    z = w.tensor("z", (1, 6, 4, 3))
    w.op("DEPTH_TO_SPACE", [y], [z], "DepthToSpaceOptions", BlockSize=2)
    filters = w.const("filters", normal(2, 1, 1, 12))
    v = w.tensor("v", (1, 3, 2, 2))
    w.op(
        "CONV_2D",
        [y, filters, w.const("bias", normal(2))],
        [v],
        "Conv2DOptions",
        Padding=1,
        StrideH=1,
        StrideW=1,
    )
    return w.build([x], [z, v]), {"x": normal(1, 6, 4, 3)}


@case
def depth_to_space_after_conv() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv("DEPTH_TO_SPACE", (1, 10, 12, 1), "DepthToSpaceOptions", BlockSize=2)


@case
def strided_slice_masks() -> tuple[bytes, dict[str, np.ndarray]]:
    consts = (
        np.array([0, 1, -1, 0], np.int32),
        np.array([1, 5, 0, 3], np.int32),
        np.array([1, 2, -2, 1], np.int32),
    )
    return after_conv("STRIDED_SLICE", (1, 2, 3, 3), "StridedSliceOptions", consts, BeginMask=1, EndMask=4)


@case
def strided_slice_shrink() -> tuple[bytes, dict[str, np.ndarray]]:
    consts = (
        np.array([0, 2, 0, 1], np.int32),
        np.array([1, 3, 6, 3], np.int32),
        np.array([1, 1, 1, 1], np.int32),
    )
    return after_conv("STRIDED_SLICE", (6, 2), "StridedSliceOptions", consts, ShrinkAxisMask=3)


@case
def slice_with_open_size() -> tuple[bytes, dict[str, np.ndarray]]:
    return after_conv(
        "SLICE", (1, 3, 4, 2), None, (np.array([0, 1, 2, 1], np.int32), np.array([-1, 3, -1, 2], np.int32))
    )


@case
def split_channels() -> tuple[bytes, dict[str, np.ndarray]]:
    w = TfliteWriter()
    x = w.tensor("x", (1, 3, 4, 6))
    axis = w.const("axis", np.array(3, np.int32))
    ys = [w.tensor(f"y{i}", (1, 3, 4, 2)) for i in range(3)]
    w.op("SPLIT", [axis, x], ys, "SplitOptions", NumSplits=3)
    return w.build([x], ys), {"x": normal(1, 3, 4, 6)}


@case
def split_v_height_after_conv() -> tuple[bytes, dict[str, np.ndarray]]:
    w = TfliteWriter()
    x = w.tensor("x", (1, 5, 6, 4))
    filters = w.const("filters", normal(4, 1, 1, 4))
    hidden = w.tensor("hidden", (1, 5, 6, 4))
    w.op(
        "CONV_2D",
        [x, filters, w.const("bias", normal(filters_out(w, filters)))],
        [hidden],
        "Conv2DOptions",
        Padding=1,
        StrideH=1,
        StrideW=1,
    )
    sizes = w.const("sizes", np.array([2, 3], np.int32))
    axis = w.const("axis", np.array([1], np.int32))
    ys = [w.tensor("top", (1, 2, 6, 4)), w.tensor("bottom", (1, 3, 6, 4))]
    w.op("SPLIT_V", [hidden, sizes, axis], ys, "SplitVOptions", NumSplits=2)
    return w.build([x], ys), {"x": normal(1, 5, 6, 4)}


@case
def gather_rows() -> tuple[bytes, dict[str, np.ndarray]]:
    return single("GATHER", (5, 3), (4, 3), "GatherOptions", (np.array([4, 0, 2, 2], np.int32),), Axis=0)


@case
def batch_matmul_adjoint() -> tuple[bytes, dict[str, np.ndarray]]:
    return single(
        "BATCH_MATMUL", (2, 3, 4), (2, 4, 5), "BatchMatMulOptions", (normal(2, 5, 3),), AdjX=True, AdjY=True
    )


@case
def cast_to_int32() -> tuple[bytes, dict[str, np.ndarray]]:
    w = TfliteWriter()
    x = w.tensor("x", (2, 5))
    y = w.tensor("y", (2, 5), "int32")
    w.op("CAST", [x], [y])
    return w.build([x], [y]), {"x": (normal(2, 5) * 10).round().astype(np.float32)}


@case
def fp16_weights_through_dequantize() -> tuple[bytes, dict[str, np.ndarray]]:
    w = TfliteWriter()
    x = w.tensor("x", (1, 6, 5, 3))
    half = w.const("filters_fp16", normal(4, 3, 3, 3).astype(np.float16))
    filters = w.tensor("filters", (4, 3, 3, 3))
    w.op("DEQUANTIZE", [half], [filters])
    y = w.tensor("y", (1, 6, 5, 4))
    w.op(
        "CONV_2D",
        [x, filters, w.const("bias", normal(4))],
        [y],
        "Conv2DOptions",
        Padding=0,
        StrideH=1,
        StrideW=1,
    )
    return w.build([x], [y]), {"x": normal(1, 6, 5, 3)}


@case
def maximum_then_minimum() -> tuple[bytes, dict[str, np.ndarray]]:
    w = TfliteWriter()
    x = w.tensor("x", (1, 5, 6, 4))
    filters = w.const("filters", normal(4, 1, 1, 4))
    hidden = w.tensor("hidden", (1, 5, 6, 4))
    w.op(
        "CONV_2D",
        [x, filters, w.const("bias", normal(4))],
        [hidden],
        "Conv2DOptions",
        Padding=1,
        StrideH=1,
        StrideW=1,
    )
    upper = w.tensor("upper", (1, 5, 6, 4))
    w.op("MAXIMUM", [hidden, x], [upper])
    y = w.tensor("y", (1, 5, 6, 4))
    w.op("MINIMUM", [upper, w.const("cap", np.float32(0.5))], [y])
    return w.build([x], [y]), {"x": normal(1, 5, 6, 4)}


@case
def expand_dims() -> tuple[bytes, dict[str, np.ndarray]]:
    return single("EXPAND_DIMS", (3, 5), (3, 1, 5), None, (np.array(1, np.int32),))


@case
def pack_two_rows() -> tuple[bytes, dict[str, np.ndarray]]:
    w = TfliteWriter()
    x = w.tensor("x", (3, 4))
    y = w.tensor("y", (3, 2, 4))
    w.op("PACK", [x, w.const("other", normal(3, 4))], [y], "PackOptions", ValuesCount=2, Axis=1)
    return w.build([x], [y]), {"x": normal(3, 4)}


@case
def keras_flatten_with_computed_shape() -> tuple[bytes, dict[str, np.ndarray]]:
    """SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE, as Keras' Flatten converts, after a convolution."""
    w = TfliteWriter()
    x = w.tensor("x", (1, 5, 6, 4))
    filters = w.const("filters", normal(3, 1, 1, 4))
    hidden = w.tensor("hidden", (1, 5, 6, 3))
    w.op(
        "CONV_2D",
        [x, filters, w.const("bias", normal(3))],
        [hidden],
        "Conv2DOptions",
        Padding=1,
        StrideH=1,
        StrideW=1,
    )
    shape = w.tensor("flatten/Shape", (4,), "int32")
    w.op("SHAPE", [hidden], [shape], "ShapeOptions", OutType=2)
    batch = w.tensor("flatten/strided_slice", (), "int32")
    bounds = [
        w.const(name, np.array([value], np.int32))
        for name, value in (("begin", 0), ("end", 1), ("stride", 1))
    ]
    w.op("STRIDED_SLICE", [shape, *bounds], [batch], "StridedSliceOptions", ShrinkAxisMask=1)
    target = w.tensor("flatten/Reshape/shape", (2,), "int32")
    w.op(
        "PACK",
        [batch, w.const("minus_one", np.array(-1, np.int32))],
        [target],
        "PackOptions",
        ValuesCount=2,
        Axis=0,
    )
    y = w.tensor("flatten/Reshape", (1, 90))
    w.op("RESHAPE", [hidden, target], [y])
    return w.build([x], [y, shape]), {"x": normal(1, 5, 6, 4)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_operator_matches_litert(tmp_path: Path, name: str) -> None:
    data, feeds = CASES[name]()
    assert_float_match(*run_both(tmp_path, data, feeds))
