"""Converters for TFLite's data-movement operators. On quantised tensors with one scale and zero
point throughout they move the stored integers, as TFLite does (bit-exact); axes are remapped
when the tensor is held as NCHW."""

from __future__ import annotations

from edgecnn.importers.tflite.builder import (
    NCHW,
    NHWC,
    TO_NCHW,
    TO_NHWC,
    ConversionError,
    GraphBuilder,
    nchw_axis,
)
from edgecnn.importers.tflite.converters.arithmetic import static_shape
from edgecnn.importers.tflite.converters.common import (
    converts,
    emit,
    fused_activation,
    inputs,
    option,
    output,
    same_quantization,
)
from edgecnn.importers.tflite.reader import TfliteOperator
from edgecnn.ops.elementwise import CastAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import (
    ConcatAttrs,
    GatherAttrs,
    PadAttrs,
    ReshapeAttrs,
    ShapeAttrs,
    SplitAttrs,
    TransposeAttrs,
)

FAR = 1 << 62
"""A slice bound past any dimension (what a begin or end mask means)."""


def _axis(b: GraphBuilder, index: int, axis: int, layout: str) -> int:
    rank = b.rank(index)
    if not -rank <= axis < max(rank, 1):
        raise ConversionError(f"axis {axis} is out of range for rank {rank}")
    axis %= max(rank, 1)
    return nchw_axis(axis) if layout == NCHW else axis


def _write(
    b: GraphBuilder, op_name: str, attrs: object, args: list[str], y: int, layout: str, direct: bool
) -> None:
    if direct:
        b.node(op_name, attrs, args, [b.put(y, layout, real=False)])
    else:
        emit(b, op_name, attrs, args, y, layout, 0)


@converts("CONCATENATION")
def concatenation(b: GraphBuilder, op: TfliteOperator) -> None:
    xs = [i for i in op.inputs if i >= 0]
    y = output(op)
    fused = fused_activation(op)
    layout = b.layout_of(*xs)
    direct = fused == 0 and same_quantization(b, [*xs, y])
    attrs = ConcatAttrs(axis=_axis(b, y, int(option(op, "Axis", 0)), layout))
    args = [b.get(i, layout, real=not direct) for i in xs]
    if direct:
        _write(b, "Concat", attrs, args, y, layout, True)
    else:
        emit(b, "Concat", attrs, args, y, layout, fused)


@converts("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def reshape(b: GraphBuilder, op: TfliteOperator) -> None:
    """The target is the output tensor's shape (what the new_shape input, the squeeze dims or the
    axis say); a shape computed at run time (Keras' SHAPE -> PACK pattern) is then not needed."""
    (x,) = inputs(op, 1)
    y = output(op)
    direct = same_quantization(b, [x, y])
    args = [b.get(x, NHWC, real=not direct), b.constant(static_shape(b, y), "shape", "int64")]
    _write(b, "Reshape", ReshapeAttrs(), args, y, NHWC, direct)


@converts("TRANSPOSE")
def transpose(b: GraphBuilder, op: TfliteOperator) -> None:
    x, perm_index = inputs(op, 2)
    y = output(op)
    perm = tuple(int(p) for p in b.constant_value(perm_index, "the permutation").reshape(-1))
    if sorted(perm) != list(range(b.rank(x))):
        raise ConversionError(f"permutation {list(perm)} does not fit rank {b.rank(x)}")
    direct = same_quantization(b, [x, y])
    _write(b, "Transpose", TransposeAttrs(perm=perm), [b.get(x, NHWC, real=not direct)], y, NHWC, direct)


@converts("PAD", "PADV2", "MIRROR_PAD")
def pad(b: GraphBuilder, op: TfliteOperator) -> None:
    x, paddings_index, value_index = inputs(op, 3)
    y = output(op)
    rank = b.rank(x)
    paddings = b.constant_value(paddings_index, "the paddings").astype("int64").reshape(-1)
    if paddings.size != 2 * rank or paddings.min(initial=0) < 0:
        raise ConversionError(f"paddings {paddings.tolist()} do not fit rank {rank}")
    widths = paddings.reshape(rank, 2)
    layout = b.layout_of(x)
    if layout == NCHW:
        widths = widths[list(TO_NCHW)]
    pads = b.constant([*widths[:, 0], *widths[:, 1]], "pads", "int64")
    mode = "constant"
    if op.opcode == "MIRROR_PAD":
        if int(option(op, "Mode", 0)) != 0:
            raise ConversionError("MIRROR_PAD in SYMMETRIC mode is not supported (only REFLECT)")
        mode = "reflect"
    direct = same_quantization(b, [x, y]) and (value_index < 0 or same_quantization(b, [x, value_index]))
    args = [b.get(x, layout, real=not direct), pads]
    if mode == "constant":
        if value_index >= 0:
            args.append(b.get(value_index, NHWC, real=not direct))
        elif direct:  # TFLite pads quantised tensors with the zero point: the real value 0
            zero_point = b.tensor(y).quantization
            assert zero_point is not None
            args.append(b.constant(zero_point.zero_point[0], "pad_value", b.tensor(y).dtype))
    _write(b, "Pad", PadAttrs(mode=mode), args, y, layout, direct)


@converts("SLICE", "STRIDED_SLICE")
def slice_(b: GraphBuilder, op: TfliteOperator) -> None:
    x, begin_index, end_index, strides_index = inputs(op, 4)
    y = output(op)
    rank = b.rank(x)
    begin = [int(v) for v in b.constant_value(begin_index, "begin").reshape(-1)]
    ends = [int(v) for v in b.constant_value(end_index, "end or size").reshape(-1)]
    if len(begin) != rank or len(ends) != rank:
        raise ConversionError(f"begin {begin} and end {ends} do not fit rank {rank}")
    steps = [1] * rank
    shrink = 0
    if op.opcode == "SLICE":
        ends = [FAR if size == -1 else start + size for start, size in zip(begin, ends)]
    else:
        steps = [int(v) for v in b.constant_value(strides_index, "strides").reshape(-1)]
        if len(steps) != rank or 0 in steps:
            raise ConversionError(f"strides {steps} do not fit rank {rank} or contain 0")
        if option(op, "EllipsisMask", 0) or option(op, "NewAxisMask", 0):
            raise ConversionError("ellipsis and new-axis masks are not supported")
        begin_mask, end_mask = int(option(op, "BeginMask", 0)), int(option(op, "EndMask", 0))
        shrink = int(option(op, "ShrinkAxisMask", 0))
        if option(op, "Offset", False):
            ends = [s + e for s, e in zip(begin, ends)]
        for axis in range(rank):
            forward = steps[axis] > 0
            if begin_mask >> axis & 1:
                begin[axis] = 0 if forward else FAR
            if end_mask >> axis & 1:
                ends[axis] = FAR if forward else -FAR
            if shrink >> axis & 1:
                ends[axis], steps[axis] = (begin[axis] + 1 if begin[axis] != -1 else FAR), 1
    direct = same_quantization(b, [x, y])
    args = [b.get(x, NHWC, real=not direct)] + [
        b.constant(values, name, "int64")
        for values, name in ((begin, "starts"), (ends, "ends"), (list(range(rank)), "axes"), (steps, "steps"))
    ]
    if not shrink:
        _write(b, "Slice", NoAttrs(), args, y, NHWC, direct)
        return
    sliced = f"{b.current}::sliced"
    b.node("Slice", NoAttrs(), args, [sliced])
    _write(
        b,
        "Reshape",
        ReshapeAttrs(),
        [sliced, b.constant(static_shape(b, y), "shape", "int64")],
        y,
        NHWC,
        direct,
    )


@converts("SPLIT", "SPLIT_V")
def split(b: GraphBuilder, op: TfliteOperator) -> None:
    if op.opcode == "SPLIT":
        axis_index, x = inputs(op, 2)
        sizes_index = -1
    else:
        x, sizes_index, axis_index = inputs(op, 3)
    ys = [i for i in op.outputs if i >= 0]
    axis_value = b.constant_value(axis_index, "the axis").reshape(-1)
    if axis_value.size != 1:
        raise ConversionError("the axis must be a single value")
    layout = b.layout_of(x)
    axis = _axis(b, x, int(axis_value[0]), layout)
    sizes = [b.tensor(y).shape[int(axis_value[0]) % b.rank(x)] for y in ys]
    if sizes_index >= 0 and len(b.constant_value(sizes_index, "the split sizes").reshape(-1)) != len(ys):
        raise ConversionError("the split sizes do not match the outputs")
    direct = same_quantization(b, [x, *ys])
    args = [b.get(x, layout, real=not direct), b.constant(sizes, "sizes", "int64")]
    attrs = SplitAttrs(axis=axis, num_outputs=len(ys))
    b.node("Split", attrs, args, [b.put(y, layout, real=not direct) for y in ys])


@converts("GATHER")
def gather(b: GraphBuilder, op: TfliteOperator) -> None:
    x, indices = inputs(op, 2)
    y = output(op)
    if int(option(op, "BatchDims", 0)) != 0:
        raise ConversionError("batch_dims other than 0 is not supported")
    direct = same_quantization(b, [x, y])
    axis = _axis(b, x, int(option(op, "Axis", 0)), NHWC)
    args = [b.get(x, NHWC, real=not direct), b.get(indices, NHWC, real=False)]
    _write(b, "Gather", GatherAttrs(axis=axis), args, y, NHWC, direct)


@converts("SHAPE")
def shape(b: GraphBuilder, op: TfliteOperator) -> None:
    """TFLite's NHWC shape, also of a tensor held as NCHW (gathered back into TFLite's order)."""
    (x,) = inputs(op, 1)
    y = output(op)
    layout = b.layout_of(x)
    target = b.put(y, NHWC, real=False)
    dims = f"{b.current}::dims"
    b.node("Shape", ShapeAttrs(), [b.get(x, layout, real=False)], [dims])
    if layout == NCHW:
        ordered = f"{b.current}::nhwc_dims"
        b.node("Gather", GatherAttrs(axis=0), [dims, b.constant(list(TO_NHWC), "order", "int64")], [ordered])
        dims = ordered
    b.node("Cast", CastAttrs(to=b.tensor(y).dtype), [dims], [target])


@converts("PACK")
def pack(b: GraphBuilder, op: TfliteOperator) -> None:
    """Stack along a new axis: each input gains the axis, then they are concatenated."""
    xs = [i for i in op.inputs if i >= 0]
    y = output(op)
    axis = _axis(b, y, int(option(op, "Axis", 0)), NHWC)
    direct = same_quantization(b, [*xs, y]) or not any(b.quantized(i) for i in [*xs, y])
    axes = b.constant([axis], "axes", "int64")
    parts = []
    for position, index in enumerate(xs):
        part = f"{b.current}::part{position}"
        b.node("Unsqueeze", NoAttrs(), [b.get(index, NHWC, real=not direct), axes], [part])
        parts.append(part)
    _write(b, "Concat", ConcatAttrs(axis=axis), parts, y, NHWC, direct)
