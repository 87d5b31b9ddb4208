"""Converters for TFLite's spatial operators, which run on NCHW tensors: convolutions, pools,
MEAN, resizes and the space/depth rearrangements. Filters are permuted to edgecnn's layout here,
once."""

from __future__ import annotations

from edgecnn.importers.tflite.builder import NCHW, NHWC, ConversionError, GraphBuilder, nchw_axis
from edgecnn.importers.tflite.converters.common import (
    ACTIVATION_NONE,
    converts,
    emit,
    fused_activation,
    inputs,
    option,
    output,
    padding,
    positive,
    same_quantization,
)
from edgecnn.importers.tflite.reader import TfliteOperator
from edgecnn.ops.conv import ConvAttrs, ConvTransposeAttrs
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from edgecnn.ops.reduce import ReduceAttrs
from edgecnn.ops.resize import ResizeAttrs
from edgecnn.ops.shape import BlockAttrs

FILTER_TO_OIHW = (0, 3, 1, 2)  # CONV_2D filters are [O, H, W, I]
FILTER_TO_IOHW = (
    3,
    0,
    1,
    2,
)  # DEPTHWISE [1, H, W, C*M] -> [C*M, 1, H, W]; TRANSPOSE_CONV [O, H, W, I] -> [I, O, H, W]


def _strides(op: TfliteOperator) -> tuple[int, int]:
    return positive((int(option(op, "StrideH", 1)), int(option(op, "StrideW", 1))), "strides")


def _dilations(op: TfliteOperator) -> tuple[int, int]:
    return positive(
        (int(option(op, "DilationHFactor", 1)), int(option(op, "DilationWFactor", 1))), "dilations"
    )


def _spatial(b: GraphBuilder, index: int) -> tuple[object, object]:
    dims = b.dims(index)
    if len(dims) != 4:
        raise ConversionError(f"expected a 4-D NHWC input, got shape {list(b.tensor(index).shape)}")
    return dims[1], dims[2]


def _bias(b: GraphBuilder, index: int) -> list[str]:
    return [b.get(index, NHWC)] if index >= 0 else []


@converts("CONV_2D", "DEPTHWISE_CONV_2D")
def conv_2d(b: GraphBuilder, op: TfliteOperator) -> None:
    x, w, bias = inputs(op, 3)
    filters = b.tensor(w).shape
    if len(filters) != 4:
        raise ConversionError(f"filter shape {list(filters)} is not 4-D")
    channels = b.tensor(x).shape[3] if b.rank(x) == 4 else 0
    if op.opcode == "DEPTHWISE_CONV_2D":
        weights = b.permuted_constant(w, FILTER_TO_IOHW, "oihw")
        group = channels
        if group < 1 or filters[3] % group:
            raise ConversionError(f"depthwise filter {list(filters)} does not fit {channels} input channels")
    else:
        weights = b.permuted_constant(w, FILTER_TO_OIHW, "oihw")
        if filters[3] < 1 or channels % filters[3]:
            raise ConversionError(f"filter {list(filters)} does not fit {channels} input channels")
        group = channels // filters[3]
    kernel = (filters[1], filters[2])
    strides, dilations = _strides(op), _dilations(op)
    pads, auto_pad = padding(op, _spatial(b, x), kernel, strides, dilations)
    attrs = ConvAttrs(
        kernel_shape=kernel, strides=strides, pads=pads, dilations=dilations, group=group, auto_pad=auto_pad
    )
    args = [b.get(x, NCHW), weights, *_bias(b, bias)]
    emit(b, "Conv", attrs, args, output(op), NCHW, fused_activation(op))


@converts("TRANSPOSE_CONV")
def transpose_conv(b: GraphBuilder, op: TfliteOperator) -> None:
    shape, w, x, bias = inputs(op, 4)
    out_shape = [int(v) for v in b.constant_value(shape, "the output shape").reshape(-1)]
    filters = b.tensor(w).shape
    in_h, in_w = _spatial(b, x)
    if len(out_shape) != 4 or len(filters) != 4 or not isinstance(in_h, int) or not isinstance(in_w, int):
        raise ConversionError("needs a 4-D output shape, 4-D filters and a static input size")
    strides = _strides(op)
    kernel = (filters[1], filters[2])
    valid = int(option(op, "Padding", 0)) == 1
    begin, end, extra = [], [], []
    for size, k, stride, out in zip((in_h, in_w), kernel, strides, out_shape[1:3]):
        full = (size - 1) * stride + k
        before = 0 if valid else max(full - out, 0) // 2  # TFLite's padding for the matching conv
        after = full - before - out
        extra.append(max(-after, 0))
        begin.append(before)
        end.append(max(after, 0))
    attrs = ConvTransposeAttrs(
        kernel_shape=kernel, strides=strides, pads=(*begin, *end), output_padding=tuple(extra)
    )
    args = [b.get(x, NCHW), b.permuted_constant(w, FILTER_TO_IOHW, "iohw"), *_bias(b, bias)]
    emit(b, "ConvTranspose", attrs, args, output(op), NCHW, fused_activation(op))


@converts("AVERAGE_POOL_2D", "MAX_POOL_2D")
def pool_2d(b: GraphBuilder, op: TfliteOperator) -> None:
    (x,) = inputs(op, 1)
    y = output(op)
    kernel = positive((int(option(op, "FilterHeight", 1)), int(option(op, "FilterWidth", 1))), "filter size")
    strides = _strides(op)
    pads, auto_pad = padding(op, _spatial(b, x), kernel, strides, (1, 1))
    fused = fused_activation(op)
    if op.opcode == "MAX_POOL_2D":
        attrs: object = MaxPoolAttrs(kernel_shape=kernel, strides=strides, pads=pads, auto_pad=auto_pad)
        if fused == ACTIVATION_NONE and same_quantization(b, [x, y]):  # the max of integers: exact
            b.node("MaxPool", attrs, [b.get(x, NCHW, real=False)], [b.put(y, NCHW, real=False)])
            return
        emit(b, "MaxPool", attrs, [b.get(x, NCHW)], y, NCHW, fused)
        return
    attrs = AveragePoolAttrs(kernel_shape=kernel, strides=strides, pads=pads, auto_pad=auto_pad)
    emit(b, "AveragePool", attrs, [b.get(x, NCHW)], y, NCHW, fused)


@converts("MEAN")
def mean(b: GraphBuilder, op: TfliteOperator) -> None:
    x, axes_index = inputs(op, 2)
    rank = b.rank(x)
    axes = sorted(
        {int(a) % rank for a in b.constant_value(axes_index, "the axes").reshape(-1)} if rank else set()
    )
    keep = bool(option(op, "KeepDims", False))
    layout = b.layout_of(x)
    if layout == NCHW:
        kept = [a for a in range(4) if a not in axes]
        order_kept = keep or kept == sorted(
            kept, key=nchw_axis
        )  # NCHW leaves the kept axes in TFLite's order
        layout = NCHW if order_kept else NHWC
    if layout == NCHW:
        axes = sorted(nchw_axis(a) for a in axes)
    out_layout = NCHW if layout == NCHW and keep else NHWC
    axes_name = b.constant(axes, "axes", "int64")
    emit(
        b, "ReduceMean", ReduceAttrs(keepdims=keep), [b.get(x, layout), axes_name], output(op), out_layout, 0
    )


@converts("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
def resize(b: GraphBuilder, op: TfliteOperator) -> None:
    x, size = inputs(op, 2)
    y = output(op)
    sizes = [int(v) for v in b.constant_value(size, "the new size").reshape(-1)]
    if len(sizes) != 2 or min(sizes) < 1:
        raise ConversionError(f"the new size {sizes} is not two positive integers")
    align = bool(option(op, "AlignCorners", False))
    half = bool(option(op, "HalfPixelCenters", False))
    if align and half:
        raise ConversionError("align_corners together with half_pixel_centers is not supported")
    if op.opcode == "RESIZE_BILINEAR":
        mode, nearest = "linear", "floor"
        coordinates = "align_corners" if align else "half_pixel" if half else "asymmetric"
    else:
        mode = "nearest"
        # TFLite: round((x) * (in-1)/(out-1)) with halves away from zero when aligning corners,
        # floor((x + 0.5) * in/out) for half-pixel centres (= the half-pixel coordinate rounded
        # half up), floor(x * in/out) otherwise
        coordinates = "align_corners" if align else "half_pixel" if half else "asymmetric"
        nearest = "round_prefer_ceil" if align or half else "floor"
    attrs = ResizeAttrs(
        mode=mode, coordinate_transformation_mode=coordinates, nearest_mode=nearest, axes=(2, 3)
    )
    direct = mode == "nearest" and same_quantization(b, [x, y])  # picks stored values: exact
    args = [b.get(x, NCHW, real=not direct), "", "", b.constant(sizes, "sizes", "int64")]
    if direct:
        b.node("Resize", attrs, args, [b.put(y, NCHW, real=False)])
    else:
        emit(b, "Resize", attrs, args, y, NCHW, 0)


@converts("SPACE_TO_DEPTH", "DEPTH_TO_SPACE")
def space_depth(b: GraphBuilder, op: TfliteOperator) -> None:
    (x,) = inputs(op, 1)
    y = output(op)
    block = int(option(op, "BlockSize", 0))
    if block < 1:
        raise ConversionError(f"block size {block} must be positive")
    op_name = "SpaceToDepth" if op.opcode == "SPACE_TO_DEPTH" else "DepthToSpace"
    direct = same_quantization(b, [x, y])
    args = [b.get(x, NCHW, real=not direct)]
    if direct:
        b.node(op_name, BlockAttrs(blocksize=block, mode="DCR"), args, [b.put(y, NCHW, real=False)])
    else:
        emit(b, op_name, BlockAttrs(blocksize=block, mode="DCR"), args, y, NCHW, 0)
