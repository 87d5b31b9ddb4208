"""Tensor-shape operators: views, copies and the shape arithmetic that exporters emit.

Over 400 lines on purpose: one family of about 25 small ops (a dataclass, an inference and a
reference each) that importers and passes look up together."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from edgecnn.ir.graph import Dim, Shape, TensorType
from edgecnn.ops.common import (
    MAX_RANK,
    broadcast_shapes,
    check,
    concrete_ints,
    dim_mul,
    first_type,
    normalize_axis,
    required_types,
    same_as_first,
    shown,
)
from edgecnn.ops.registry import IntoAdapter, NoAttrs, StepShapes, register_op
from edgecnn.ops.traits import axis_not_batch, broadcast_per_image, each_image, one_dtype

Values = Sequence["np.ndarray | None"]
Types = Sequence["TensorType | None"]


def _product(dims: Sequence[Dim]) -> Dim:
    result: Dim = 1
    for d in dims:
        result = dim_mul(result, d)
    return result


def _unknown(dtype: str, rank: int | None) -> TensorType:
    return TensorType(dtype, None if rank is None else (None,) * rank)


def _vector_length(t: TensorType | None) -> int | None:
    if t is None or t.shape is None or len(t.shape) != 1 or not isinstance(t.shape[0], int):
        return None
    return t.shape[0]


@register_op("Identity", infer=same_as_first, per_sample=broadcast_per_image, view=True)
def identity(attrs: NoAttrs, x: np.ndarray) -> np.ndarray:
    return x.copy()


def infer_dropout(attrs: object, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    return [x, TensorType("bool", x.shape)]


@register_op(
    "Dropout", infer=infer_dropout, inputs=(1, 3), outputs=(1, 2), per_sample=broadcast_per_image, view=True
)
def dropout(
    attrs: NoAttrs, x: np.ndarray, ratio: np.ndarray | None = None, training: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Inference: the identity (training mode is not supported)."""
    check(
        training is None or not bool(np.asarray(training).reshape(-1)[0]),
        "Dropout in training mode is not supported",
    )
    return x.copy(), np.ones(x.shape, dtype=bool)


@dataclass(frozen=True)
class FlattenAttrs:
    axis: int = 1


def flatten_axis(attrs: FlattenAttrs, rank: int) -> int:
    check(-rank <= attrs.axis <= rank, f"axis {attrs.axis} is out of range for rank {rank}")
    return attrs.axis + rank if attrs.axis < 0 else attrs.axis


def infer_flatten(attrs: FlattenAttrs, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    if x.shape is None:
        return [_unknown(x.dtype, 2)]
    axis = flatten_axis(attrs, len(x.shape))
    return [TensorType(x.dtype, (_product(x.shape[:axis]), _product(x.shape[axis:])))]


def flatten_per_sample(step: StepShapes) -> bool:
    """Per image when the flattened rows are the images (axis >= 1)."""
    x = step.inputs[0]
    return x is not None and len(x) > 0 and normalize_axis(step.attrs.axis, len(x)) >= 1


@register_op("Flatten", attrs=FlattenAttrs, infer=infer_flatten, per_sample=flatten_per_sample, view=True)
def flatten(attrs: FlattenAttrs, x: np.ndarray) -> np.ndarray:
    axis = flatten_axis(attrs, x.ndim)
    return x.reshape(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))).copy()


@dataclass(frozen=True)
class ReshapeAttrs:
    allowzero: bool = False  # True: a 0 in the target shape means size 0, not "copy this dim"


def reshape_target(attrs: ReshapeAttrs, in_shape: Shape, target: list[int]) -> tuple[Dim, ...]:
    shape = shown(target)
    check(
        len(target) <= MAX_RANK, f"shape {shape} has {len(target)} dimensions, over the {MAX_RANK} supported"
    )
    check(target.count(-1) <= 1, f"shape {shape} has more than one -1")
    dims: list[Dim] = []
    for i, t in enumerate(target):
        if t == 0 and not attrs.allowzero:
            check(i < len(in_shape), f"shape {shape} copies dim {i}, but the input has rank {len(in_shape)}")
            dims.append(in_shape[i])
        else:
            check(t >= -1, f"shape {shape} has a negative size")
            dims.append(t)
    if -1 in dims:
        known_dims, total_dims = _cancel_symbols([d for d in dims if d != -1], list(in_shape))
        known, total = _product(known_dims), _product(total_dims)
        if isinstance(known, int) and isinstance(total, int):
            check(known != 0 and total % known == 0, f"cannot reshape {shown(in_shape)} to {shape}")
            dims[dims.index(-1)] = total // known
        else:
            dims[dims.index(-1)] = None
    else:
        total, wanted = _product(in_shape), _product(dims)
        if isinstance(total, int) and isinstance(wanted, int):
            check(total == wanted, f"cannot reshape {shown(in_shape)} ({total} elements) to {shape}")
    return tuple(dims)


def _cancel_symbols(a: list[Dim], b: list[Dim]) -> tuple[list[Dim], list[Dim]]:
    """Drop symbolic dims that appear in both products (a batch dim copied through a reshape)."""
    a, b = list(a), list(b)
    for d in list(a):
        if isinstance(d, str) and d in b:
            a.remove(d)
            b.remove(d)
    return a, b


def infer_reshape(attrs: ReshapeAttrs, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    target = concrete_ints(values[1])
    if target is None or x.shape is None:
        return [_unknown(x.dtype, _vector_length(types[1]))]
    return [TensorType(x.dtype, reshape_target(attrs, x.shape, target))]


@register_op(
    "Reshape", attrs=ReshapeAttrs, infer=infer_reshape, inputs=2, per_sample=broadcast_per_image, view=True
)
def reshape(attrs: ReshapeAttrs, x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    dims = reshape_target(attrs, x.shape, concrete_ints(shape))
    return x.reshape(dims).copy()


@dataclass(frozen=True)
class TransposeAttrs:
    perm: tuple[int, ...] = ()  # empty: reverse the axes


def transpose_perm(attrs: TransposeAttrs, rank: int) -> tuple[int, ...]:
    perm = attrs.perm or tuple(reversed(range(rank)))
    check(sorted(perm) == list(range(rank)), f"perm {shown(perm)} is not a permutation of {rank} axes")
    return tuple(perm)


def infer_transpose(attrs: TransposeAttrs, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    if x.shape is None:
        return [_unknown(x.dtype, len(attrs.perm) or None)]
    return [TensorType(x.dtype, tuple(x.shape[p] for p in transpose_perm(attrs, len(x.shape))))]


def transpose_per_sample(step: StepShapes) -> bool:
    """Per image when the batch axis stays first."""
    return bool(step.attrs.perm) and step.attrs.perm[0] == 0


def transpose_into(
    attrs: TransposeAttrs, in_types: Types, out_types: Sequence[TensorType]
) -> IntoAdapter | None:
    """A copy of the transposed view into the given buffer."""
    x = in_types[0]
    if x is None or not one_dtype(*in_types, *out_types):
        return None
    perm = transpose_perm(attrs, len(x.dims))

    def run(out: np.ndarray, x: np.ndarray) -> None:
        np.copyto(out, x.transpose(perm))

    return IntoAdapter(run)


@register_op(
    "Transpose",
    attrs=TransposeAttrs,
    infer=infer_transpose,
    per_sample=transpose_per_sample,
    reference_into=transpose_into,
)
def transpose(attrs: TransposeAttrs, x: np.ndarray) -> np.ndarray:
    return np.asarray(x.transpose(transpose_perm(attrs, x.ndim)), order="C")


def squeeze_axes(shape: Shape, axes: list[int] | None) -> list[int]:
    if axes is None:
        check(all(isinstance(d, int) for d in shape), "Squeeze without axes needs a known shape")
        return [i for i, d in enumerate(shape) if d == 1]
    normalized = sorted({normalize_axis(a, len(shape)) for a in axes})
    for a in normalized:
        check(
            shape[a] in (1, None) or isinstance(shape[a], str), f"cannot squeeze axis {a} of size {shape[a]}"
        )
    return normalized


def infer_squeeze(attrs: object, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    has_axes = len(types) > 1 and types[1] is not None
    axes = concrete_ints(values[1]) if has_axes else None
    if x.shape is None or (has_axes and axes is None):
        return [TensorType(x.dtype, None)]
    if not has_axes and not all(isinstance(d, int) for d in x.shape):
        return [TensorType(x.dtype, None)]
    drop = set(squeeze_axes(x.shape, axes))
    return [TensorType(x.dtype, tuple(d for i, d in enumerate(x.shape) if i not in drop))]


@register_op("Squeeze", infer=infer_squeeze, inputs=(1, 2), per_sample=broadcast_per_image, view=True)
def squeeze(attrs: NoAttrs, x: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
    drop = squeeze_axes(x.shape, concrete_ints(axes))
    return np.squeeze(x, axis=tuple(drop)).copy()


def unsqueezed_shape(shape: Shape, axes: list[int]) -> tuple[Dim, ...]:
    rank = len(shape) + len(axes)
    normalized = sorted(normalize_axis(a, rank) for a in axes)
    check(len(set(normalized)) == len(normalized), f"axes {shown(axes)} repeat an axis")
    rest = iter(shape)
    return tuple(1 if i in normalized else next(rest) for i in range(rank))


def infer_unsqueeze(attrs: object, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    axes = concrete_ints(values[1])
    if x.shape is None or axes is None:
        return [TensorType(x.dtype, None)]
    return [TensorType(x.dtype, unsqueezed_shape(x.shape, axes))]


@register_op("Unsqueeze", infer=infer_unsqueeze, inputs=2, per_sample=each_image, view=True)
def unsqueeze(attrs: NoAttrs, x: np.ndarray, axes: np.ndarray) -> np.ndarray:
    return x.reshape(unsqueezed_shape(x.shape, concrete_ints(axes))).copy()


@dataclass(frozen=True)
class ConcatAttrs:
    axis: int


def infer_concat(attrs: ConcatAttrs, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    present = required_types(types, "every input is required")
    dtypes = {t.dtype for t in present}
    check(len(dtypes) == 1, f"inputs must share one element type, got {sorted(dtypes)}")
    shapes = [t.shape for t in present if t.shape is not None]
    if len(shapes) != len(present):
        return [_unknown(x.dtype, x.rank)]
    rank = len(shapes[0])
    check(all(len(s) == rank for s in shapes), f"inputs have different ranks: {[list(s) for s in shapes]}")
    axis = normalize_axis(attrs.axis, rank)
    result: list[Dim] = []
    for i in range(rank):
        dims = [s[i] for s in shapes]
        if i == axis:
            total: Dim = 0
            for d in dims:
                total = total + d if isinstance(total, int) and isinstance(d, int) else None
            result.append(total)
        else:
            known = {d for d in dims if isinstance(d, int)}
            check(len(known) <= 1, f"inputs differ in dimension {i}: {dims}")
            result.append(known.pop() if known else dims[0])
    return [TensorType(x.dtype, tuple(result))]


def concat_into(attrs: ConcatAttrs, in_types: Types, out_types: Sequence[TensorType]) -> IntoAdapter | None:
    """``np.concatenate(out=)`` when every input and the output share one element type."""
    if None in in_types or not one_dtype(*in_types, *out_types):
        return None
    axis = normalize_axis(attrs.axis, len(out_types[0].dims))

    def run(out: np.ndarray, *xs: np.ndarray) -> None:
        np.concatenate(xs, axis=axis, out=out)

    return IntoAdapter(run)


@register_op(
    "Concat",
    attrs=ConcatAttrs,
    infer=infer_concat,
    inputs=(1, None),
    per_sample=axis_not_batch,
    reference_into=concat_into,
    slabs="inputs",
)
def concat(attrs: ConcatAttrs, *xs: np.ndarray) -> np.ndarray:
    return np.concatenate(xs, axis=attrs.axis)


@dataclass(frozen=True)
class SplitAttrs:
    axis: int = 0
    num_outputs: int = 1  # how many outputs the node has (equal parts unless sizes are given)


def split_sizes(attrs: SplitAttrs, length: Dim, sizes: list[int] | None) -> list[Dim]:
    if sizes is not None:
        check(len(sizes) == attrs.num_outputs, f"split {sizes} does not give {attrs.num_outputs} outputs")
        check(all(s >= 0 for s in sizes), f"split {sizes} has a negative size")
        if isinstance(length, int):
            check(sum(sizes) == length, f"split {sizes} does not add up to {length}")
        return list(sizes)
    if not isinstance(length, int):
        return [None] * attrs.num_outputs
    part = -(-length // attrs.num_outputs)  # the last part may be smaller (opset 18)
    return [min(part, max(length - i * part, 0)) for i in range(attrs.num_outputs)]


def infer_split(attrs: SplitAttrs, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    check(attrs.num_outputs >= 1, "Split needs at least one output")
    has_sizes = len(types) > 1 and types[1] is not None
    sizes = concrete_ints(values[1]) if has_sizes else None
    if x.shape is None or (has_sizes and sizes is None):
        return [_unknown(x.dtype, x.rank)] * attrs.num_outputs
    axis = normalize_axis(attrs.axis, len(x.shape))
    parts = split_sizes(attrs, x.shape[axis], sizes)
    return [TensorType(x.dtype, (*x.shape[:axis], p, *x.shape[axis + 1 :])) for p in parts]


def split_into(attrs: SplitAttrs, in_types: Types, out_types: Sequence[TensorType]) -> IntoAdapter | None:
    """A copy of each part of the input into its output's buffer, when the data and the outputs
    share one element type and the outputs' sizes along the axis add up to the input's."""
    x = in_types[0]
    if x is None or not one_dtype(x, *out_types):
        return None
    shape = x.dims
    axis = normalize_axis(attrs.axis, len(shape))
    parts = [t.dims[axis] for t in out_types]
    if sum(parts) != shape[axis] or len(parts) != attrs.num_outputs:
        return None
    bounds = np.cumsum([0, *parts]).tolist()
    cuts = [
        tuple(slice(None) if a != axis else slice(bounds[k], bounds[k + 1]) for a in range(len(shape)))
        for k in range(len(parts))
    ]

    def run(outs: tuple[np.ndarray, ...], x: np.ndarray, *_: object) -> None:
        for out, cut in zip(outs, cuts):
            np.copyto(out, x[cut])

    def run_one(out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """One output is given as itself, not in a tuple (the executor's protocol)."""
        np.copyto(out, x)

    return IntoAdapter(run if len(parts) > 1 else run_one)


@register_op(
    "Split",
    attrs=SplitAttrs,
    infer=infer_split,
    inputs=(1, 2),
    outputs=(1, 1 << 16),
    per_sample=axis_not_batch,
    reference_into=split_into,
    slabs="outputs",
)
def split(attrs: SplitAttrs, x: np.ndarray, sizes: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    axis = normalize_axis(attrs.axis, x.ndim)
    parts = split_sizes(attrs, x.shape[axis], concrete_ints(sizes))
    bounds = np.cumsum([0, *parts])
    return tuple(np.take(x, np.arange(bounds[i], bounds[i + 1]), axis=axis) for i in range(attrs.num_outputs))


def slice_plan(shape: Shape, inputs: list[list[int] | None]) -> list[slice] | None:
    """Per-axis Python slices for Slice(starts, ends, axes, steps), or None if unknown."""
    starts, ends, axes, steps = inputs
    if starts is None or ends is None:
        return None
    rank = len(shape)
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    check(
        len(starts) == len(ends) == len(axes) == len(steps), "starts, ends, axes and steps differ in length"
    )
    plan = [slice(None)] * rank
    for start, end, axis, step in zip(starts, ends, axes, steps):
        check(step != 0, "slice step cannot be 0")
        a = normalize_axis(axis, rank)
        dim = shape[a]
        if not isinstance(dim, int):
            return None
        begin, stop, stride = slice(start, end, step).indices(dim)
        plan[a] = slice(begin, stop if stop >= 0 else None, stride)
    return plan


def _slice_inputs(values: Values) -> list[list[int] | None]:
    padded = list(values[1:]) + [None] * (5 - len(values))
    return [concrete_ints(v) for v in padded[:4]]


def _sliced_length(s: slice, dim: Dim) -> Dim:
    if s == slice(None):
        return dim
    assert isinstance(dim, int)  # slice_plan gave up on a sliced axis of unknown size
    return len(range(*s.indices(dim)))


def infer_slice(attrs: object, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    given = [t is not None for t in list(types[3:5]) + [None] * (5 - len(types))]
    known = _slice_inputs(values)
    if (given[0] and known[2] is None) or (given[1] and known[3] is None):
        return [_unknown(x.dtype, len(x.shape))]
    plan = slice_plan(x.shape, known)
    if plan is None:
        if known[0] is None:
            return [_unknown(x.dtype, len(x.shape))]
        axes = known[2] if known[2] is not None else range(len(known[0]))
        touched = {normalize_axis(a, len(x.shape)) for a in axes}
        return [TensorType(x.dtype, tuple(None if i in touched else d for i, d in enumerate(x.shape)))]
    return [
        TensorType(
            x.dtype,
            tuple(_sliced_length(s, d) for s, d in zip(plan, x.shape)),
        )
    ]


@register_op("Slice", infer=infer_slice, inputs=(3, 5))
def slice_(attrs: NoAttrs, x: np.ndarray, *bounds: np.ndarray | None) -> np.ndarray:
    plan = slice_plan(x.shape, _slice_inputs((x, *bounds)))
    assert plan is not None
    return x[tuple(plan)].copy()


@dataclass(frozen=True)
class GatherAttrs:
    axis: int = 0


def infer_gather(attrs: GatherAttrs, types: Types, values: Values) -> list[TensorType]:
    x, indices = first_type(types), types[1]
    check(indices is not None and indices.dtype in ("int32", "int64"), "indices must be int32 or int64")
    assert indices is not None
    if x.shape is None or indices.shape is None:
        return [TensorType(x.dtype, None)]
    axis = normalize_axis(attrs.axis, len(x.shape))
    idx, size = values[1], x.shape[axis]
    if idx is not None and isinstance(size, int):
        check(
            bool(np.all((idx >= -size) & (idx < size))),
            f"indices out of range for axis {axis} of size {size}",
        )
    return [TensorType(x.dtype, (*x.shape[:axis], *indices.shape, *x.shape[axis + 1 :]))]


def gather_per_sample(step: StepShapes) -> bool:
    """Per image when the axis is not the batch and the indices are the same for every image."""
    return step.constants[1] is not None and axis_not_batch(step)


@register_op("Gather", attrs=GatherAttrs, infer=infer_gather, inputs=2, per_sample=gather_per_sample)
def gather(attrs: GatherAttrs, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    axis = normalize_axis(attrs.axis, x.ndim)
    size = x.shape[axis]
    check(
        bool(np.all((indices >= -size) & (indices < size))),
        f"indices out of range for axis {axis} of size {size}",
    )
    return np.take(x, indices.astype(np.int64), axis=axis)


@dataclass(frozen=True)
class ShapeAttrs:
    start: int = 0
    end: int | None = None


def shape_range(attrs: ShapeAttrs, rank: int) -> range:
    def clamp(i: int) -> int:
        return min(max(i + rank if i < 0 else i, 0), rank)

    return range(clamp(attrs.start), rank if attrs.end is None else clamp(attrs.end))


def infer_shape(attrs: ShapeAttrs, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    return [TensorType("int64", (None if x.shape is None else len(shape_range(attrs, len(x.shape))),))]


@register_op("Shape", attrs=ShapeAttrs, infer=infer_shape, shape_only=True)
def shape(attrs: ShapeAttrs, x: np.ndarray) -> np.ndarray:
    return np.array([x.shape[i] for i in shape_range(attrs, x.ndim)], dtype=np.int64)


@register_op("Size", infer=lambda attrs, types, values: [TensorType("int64", ())], shape_only=True)
def size(attrs: NoAttrs, x: np.ndarray) -> np.ndarray:
    return np.array(x.size, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class ConstantAttrs:
    value: np.ndarray = field(repr=False)


@register_op(
    "Constant",
    attrs=ConstantAttrs,
    infer=lambda attrs, types, values: [TensorType(attrs.value.dtype.name, tuple(attrs.value.shape))],
    inputs=0,
)
def constant(attrs: ConstantAttrs) -> np.ndarray:
    return attrs.value.copy()


@dataclass(frozen=True)
class ConstantOfShapeAttrs:
    value: float = 0.0
    dtype: str = "float32"


def _shape_input(t: TensorType | None, value: np.ndarray | None, dtype: str) -> TensorType:
    dims = concrete_ints(value)
    if dims is not None:
        check(all(d >= 0 for d in dims), f"shape {shown(dims)} has a negative size")
        return TensorType(dtype, tuple(dims))
    return _unknown(dtype, _vector_length(t))


@register_op(
    "ConstantOfShape",
    attrs=ConstantOfShapeAttrs,
    infer=lambda attrs, types, values: [_shape_input(types[0], values[0], attrs.dtype)],
)
def constant_of_shape(attrs: ConstantOfShapeAttrs, dims: np.ndarray) -> np.ndarray:
    return np.full(concrete_ints(dims), attrs.value, dtype=attrs.dtype)


def infer_expand(attrs: object, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    target = concrete_ints(values[1])
    if target is None or x.shape is None:
        return [TensorType(x.dtype, None)]
    return [TensorType(x.dtype, broadcast_shapes(x.shape, tuple(target)))]


@register_op("Expand", infer=infer_expand, inputs=2)
def expand(attrs: NoAttrs, x: np.ndarray, dims: np.ndarray) -> np.ndarray:
    target = np.broadcast_shapes(x.shape, tuple(concrete_ints(dims)))
    return np.broadcast_to(x, target).copy()


def infer_tile(attrs: object, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    repeats = concrete_ints(values[1])
    if repeats is None or x.shape is None:
        return [_unknown(x.dtype, x.rank)]
    check(len(repeats) == len(x.shape), f"repeats {shown(repeats)} do not match rank {len(x.shape)}")
    check(all(r >= 0 for r in repeats), f"repeats {shown(repeats)} must be >= 0")
    return [TensorType(x.dtype, tuple(dim_mul(d, r) for d, r in zip(x.shape, repeats)))]


@register_op("Tile", infer=infer_tile, inputs=2)
def tile(attrs: NoAttrs, x: np.ndarray, repeats: np.ndarray) -> np.ndarray:
    return np.tile(x, concrete_ints(repeats))


@dataclass(frozen=True)
class PadAttrs:
    mode: str = "constant"  # constant, reflect, edge, wrap


PadMode = Literal["constant", "reflect", "edge", "wrap"]

PAD_MODES: dict[str, PadMode] = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def pad_widths(rank: int, pads: list[int], axes: list[int] | None) -> list[tuple[int, int]]:
    axes = list(range(rank)) if axes is None else [normalize_axis(a, rank) for a in axes]
    check(len(pads) == 2 * len(axes), f"pads {shown(pads)} must have {2 * len(axes)} values")
    widths = [(0, 0)] * rank
    for i, a in enumerate(axes):
        widths[a] = (pads[i], pads[i + len(axes)])
    return widths


def infer_pad(attrs: PadAttrs, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    check(attrs.mode in PAD_MODES, f"mode must be one of {sorted(PAD_MODES)}, got {attrs.mode!r}")
    pads = concrete_ints(values[1])
    has_axes = len(types) > 3 and types[3] is not None
    axes = concrete_ints(values[3]) if has_axes else None
    if x.shape is None or pads is None or (has_axes and axes is None):
        return [_unknown(x.dtype, x.rank)]
    widths = pad_widths(len(x.shape), pads, axes)
    shape = []
    for d, (b, e) in zip(x.shape, widths):
        new = d + b + e if isinstance(d, int) else None
        check(new is None or new >= 0, f"pads {shown(pads)} remove more than the input has")
        shape.append(new)
    return [TensorType(x.dtype, tuple(shape))]


@register_op("Pad", attrs=PadAttrs, infer=infer_pad, inputs=(2, 4))
def pad(
    attrs: PadAttrs,
    x: np.ndarray,
    pads: np.ndarray,
    value: np.ndarray | None = None,
    axes: np.ndarray | None = None,
) -> np.ndarray:
    """Negative pads crop."""
    widths = pad_widths(x.ndim, concrete_ints(pads), concrete_ints(axes))
    crop = tuple(slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(widths))
    grow = [(max(b, 0), max(e, 0)) for b, e in widths]
    x = x[crop]
    if attrs.mode == "constant":
        fill = 0 if value is None or value.size == 0 else value.reshape(-1)[0]
        return np.pad(x, grow, mode="constant", constant_values=fill)
    return np.pad(x, grow, mode=PAD_MODES[attrs.mode])


def infer_range(attrs: object, types: Types, values: Values) -> list[TensorType]:
    dtype = first_type(types).dtype
    if any(v is None for v in values):
        return [TensorType(dtype, (None,))]
    start, limit, delta = (np.asarray(v).reshape(()) for v in values)
    check(delta != 0, "delta cannot be 0")
    return [TensorType(dtype, (max(int(np.ceil((limit - start) / delta)), 0),))]


@register_op("Range", infer=infer_range, inputs=3)
def range_(attrs: NoAttrs, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
    s, lim, d = (np.asarray(v).reshape(()) for v in (start, limit, delta))
    count = max(int(np.ceil((lim - s) / d)), 0)
    return (s + d * np.arange(count)).astype(start.dtype)


@dataclass(frozen=True)
class BlockAttrs:
    blocksize: int
    mode: str = "DCR"  # DepthToSpace only: DCR (depth-column-row) or CRD


def infer_depth_to_space(attrs: BlockAttrs, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    check(attrs.mode in ("DCR", "CRD"), f"mode must be DCR or CRD, got {attrs.mode!r}")
    check(attrs.blocksize >= 1, "blocksize must be >= 1")
    if x.shape is None:
        return [_unknown(x.dtype, 4)]
    check(len(x.shape) == 4, f"input must be NCHW, got {x}")
    n, c, h, w = x.shape
    b = attrs.blocksize
    if isinstance(c, int):
        check(c % (b * b) == 0, f"{c} channels are not divisible by blocksize² {b * b}")
    return [
        TensorType(x.dtype, (n, c // (b * b) if isinstance(c, int) else None, dim_mul(h, b), dim_mul(w, b)))
    ]


@register_op("DepthToSpace", attrs=BlockAttrs, infer=infer_depth_to_space, per_sample=broadcast_per_image)
def depth_to_space(attrs: BlockAttrs, x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    b = attrs.blocksize
    if attrs.mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (b * b), h * b, w * b)


def infer_space_to_depth(attrs: BlockAttrs, types: Types, values: Values) -> list[TensorType]:
    x = first_type(types)
    check(attrs.mode in ("DCR", "CRD"), f"mode must be DCR or CRD, got {attrs.mode!r}")
    check(attrs.blocksize >= 1, "blocksize must be >= 1")
    if x.shape is None:
        return [_unknown(x.dtype, 4)]
    check(len(x.shape) == 4, f"input must be NCHW, got {x}")
    n, c, h, w = x.shape
    b = attrs.blocksize
    for d in (h, w):
        if isinstance(d, int):
            check(d % b == 0, f"spatial size {d} is not divisible by blocksize {b}")
    return [
        TensorType(
            x.dtype,
            (
                n,
                dim_mul(c, b * b),
                h // b if isinstance(h, int) else None,
                w // b if isinstance(w, int) else None,
            ),
        )
    ]


@register_op("SpaceToDepth", attrs=BlockAttrs, infer=infer_space_to_depth, per_sample=broadcast_per_image)
def space_to_depth(attrs: BlockAttrs, x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    b = attrs.blocksize
    blocks = x.reshape(n, c, h // b, b, w // b, b)
    y = blocks.transpose(0, 3, 5, 1, 2, 4) if attrs.mode == "DCR" else blocks.transpose(0, 1, 3, 5, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)
