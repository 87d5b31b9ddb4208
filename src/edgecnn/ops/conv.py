"""Convolution and transposed convolution (1-D, 2-D, 3-D; groups, dilations, strides, pads)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import Dim, TensorType, concrete_dims
from edgecnn.ops.common import AutoPad, check, first_type, input_type, shown
from edgecnn.ops.registry import register_op
from edgecnn.ops.spatial import output_dims, pad_spatial, resolve_pads, sliding_windows, spatial_defaults
from edgecnn.ops.traits import conv_macs, conv_transpose_macs, each_image


@dataclass(frozen=True)
class ConvAttrs:
    """Empty tuples mean the ONNX defaults (kernel from the weights, unit strides, no padding)."""

    kernel_shape: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    pads: tuple[int, ...] = ()
    dilations: tuple[int, ...] = ()
    group: int = 1
    auto_pad: AutoPad = AutoPad.NOTSET


@dataclass(frozen=True)
class ConvGeometry:
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...] | None  # None: SAME padding whose sizes are not known yet


def conv_geometry(attrs: ConvAttrs, x_shape: Sequence[Dim], w_shape: Sequence[Dim]) -> ConvGeometry:
    """Validated geometry of a Conv for given input and weight shapes."""
    rank = len(x_shape) - 2
    check(rank >= 1, f"input must be (N, C, spatial...), got rank {len(x_shape)}")
    check(
        len(w_shape) == rank + 2, f"weights of rank {len(w_shape)} do not match an input of rank {rank + 2}"
    )
    kernel_dims: tuple[Dim, ...] = attrs.kernel_shape or tuple(w_shape[2:])
    check(
        all(isinstance(k, int) and k >= 1 for k in kernel_dims),
        f"kernel_shape {list(kernel_dims)} is invalid",
    )
    kernel = tuple(k for k in kernel_dims if isinstance(k, int))  # all of them (checked)
    check(len(kernel) == rank, f"kernel_shape {shown(kernel)} does not match {rank} spatial dims")
    if attrs.kernel_shape and all(isinstance(d, int) for d in w_shape[2:]):
        check(
            tuple(w_shape[2:]) == tuple(kernel),
            f"kernel_shape {shown(kernel)} != weight shape {list(w_shape)}",
        )
    strides, dilations, pads = spatial_defaults(rank, attrs.strides, attrs.dilations, attrs.pads)
    resolved = resolve_pads(attrs.auto_pad, x_shape[2:], kernel, strides, dilations, pads)
    return ConvGeometry(kernel, strides, dilations, resolved)


def _check_channels(attrs: ConvAttrs, channels: Dim, w_shape: Sequence[Dim]) -> None:
    check(attrs.group >= 1, f"group must be >= 1, got {attrs.group}")
    out_channels, per_group = w_shape[0], w_shape[1]
    if isinstance(out_channels, int):
        check(
            out_channels % attrs.group == 0,
            f"{out_channels} output channels are not divisible by group {attrs.group}",
        )
    if isinstance(channels, int) and isinstance(per_group, int):
        check(
            channels == per_group * attrs.group,
            f"input has {channels} channels but weights expect {per_group} x group {attrs.group}",
        )


def infer_conv(attrs: ConvAttrs, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    x = first_type(types)
    w = input_type(types, 1, "weights")
    if x.shape is None or w.shape is None:
        return [TensorType(x.dtype, None)]
    _check_channels(attrs, x.shape[1], w.shape)
    geo = conv_geometry(attrs, x.shape, w.shape)
    bias = types[2] if len(types) > 2 else None
    if bias is not None and bias.shape is not None:
        check(len(bias.shape) == 1, f"bias must be 1-D, got {bias}")
    spatial = output_dims(x.shape[2:], geo.kernel, geo.strides, geo.dilations, geo.pads)
    return [TensorType(x.dtype, (x.shape[0], w.shape[0], *spatial))]


def im2col(x: np.ndarray, geo: ConvGeometry) -> tuple[np.ndarray, tuple[int, ...]]:
    """Sliding-window view (N, C, *out, *kernel) of the padded input and the output spatial size."""
    rank = len(geo.kernel)
    pads = geo.pads
    assert pads is not None  # concrete shapes always resolve
    out = concrete_dims(output_dims(x.shape[2:], geo.kernel, geo.strides, geo.dilations, pads))
    padded = pad_spatial(x, pads[:rank], pads[rank:], 0)
    return sliding_windows(padded, geo.kernel, geo.strides, geo.dilations, out), out


def conv_weight(attrs: object, values: Sequence[np.ndarray | None]) -> tuple[int, int] | None:
    """Constant weights [M, C/group, *kernel]: output channels on axis 0."""
    return (1, 0) if len(values) > 1 and values[1] is not None else None


@register_op(
    "Conv",
    attrs=ConvAttrs,
    infer=infer_conv,
    inputs=(2, 3),
    with_activation="FusedConv",
    per_sample=each_image,
    weight=conv_weight,
    macs=conv_macs(),
)
def conv(attrs: ConvAttrs, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """im2col + one matrix product per group (the textbook algorithm of seed 002)."""
    geo = conv_geometry(attrs, x.shape, w.shape)
    windows, out = im2col(x, geo)
    n, groups = x.shape[0], attrs.group
    in_per_group, out_per_group = w.shape[1], w.shape[0] // groups
    rank, taps = len(out), int(np.prod(geo.kernel))
    positions = int(np.prod(out))
    # (N, G, Cg, *out, *k) -> (G, N * out, Cg * k)
    cols = windows.reshape(n, groups, in_per_group, *out, *geo.kernel)
    order = (1, 0, *range(3, 3 + rank), 2, *range(3 + rank, 3 + 2 * rank))
    cols = cols.transpose(order).reshape(groups, n * positions, in_per_group * taps)
    weights = w.reshape(groups, out_per_group, in_per_group * taps).transpose(0, 2, 1)
    y = np.matmul(cols, weights)  # (G, N * out, Mg)
    y = y.reshape(groups, n, positions, out_per_group).transpose(1, 0, 3, 2).reshape(n, w.shape[0], *out)
    if b is not None:
        y = y + b.reshape(-1, *([1] * rank))
    return np.asarray(y, dtype=x.dtype, order="C")


@dataclass(frozen=True)
class ConvTransposeAttrs:
    kernel_shape: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    pads: tuple[int, ...] = ()
    dilations: tuple[int, ...] = ()
    group: int = 1
    output_padding: tuple[int, ...] = ()
    output_shape: tuple[int, ...] = ()
    auto_pad: AutoPad = AutoPad.NOTSET


@dataclass(frozen=True)
class TransposeGeometry:
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begins: tuple[int, ...] | None
    out: tuple[Dim, ...]


def conv_transpose_geometry(
    attrs: ConvTransposeAttrs, x_shape: Sequence[Dim], w_shape: Sequence[Dim]
) -> TransposeGeometry:
    rank = len(x_shape) - 2
    check(rank >= 1, f"input must be (N, C, spatial...), got rank {len(x_shape)}")
    check(
        len(w_shape) == rank + 2, f"weights of rank {len(w_shape)} do not match an input of rank {rank + 2}"
    )
    kernel_dims = tuple(attrs.kernel_shape or w_shape[2:])
    check(
        all(isinstance(k, int) for k in kernel_dims) and len(kernel_dims) == rank,
        f"kernel_shape {list(kernel_dims)} is invalid",
    )
    kernel = tuple(k for k in kernel_dims if isinstance(k, int))  # all of them (checked)
    strides, dilations, pads = spatial_defaults(rank, attrs.strides, attrs.dilations, attrs.pads)
    extra = attrs.output_padding or (0,) * rank
    check(len(extra) == rank, f"output_padding {shown(extra)} does not match {rank} spatial dims")
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    full: list[int | None] = [
        (i - 1) * s + span + e if isinstance(i, int) else None
        for i, s, span, e in zip(x_shape[2:], strides, spans, extra)
    ]
    if attrs.output_shape or attrs.auto_pad in (AutoPad.SAME_UPPER, AutoPad.SAME_LOWER):
        target: list[int | None] = (
            list(attrs.output_shape[-rank:])
            if attrs.output_shape
            else [i * s if isinstance(i, int) else None for i, s in zip(x_shape[2:], strides)]
        )
        if any(f is None or t is None for f, t in zip(full, target)):
            return TransposeGeometry(kernel, strides, dilations, None, tuple(target))
        totals = [f - t for f, t in zip(full, target) if f is not None and t is not None]  # all of them
        upper = attrs.auto_pad is AutoPad.SAME_UPPER  # else the larger half goes first
        begins = tuple(t // 2 if upper else t - t // 2 for t in totals)
        return TransposeGeometry(kernel, strides, dilations, begins, tuple(target))
    if attrs.auto_pad is AutoPad.VALID:
        pads = (0,) * (2 * rank)
    out = tuple(f - pads[i] - pads[i + rank] if f is not None else None for i, f in enumerate(full))
    check(all(o is None or o > 0 for o in out), f"pads {shown(pads)} leave no output")
    return TransposeGeometry(kernel, strides, dilations, pads[:rank], out)


def infer_conv_transpose(
    attrs: ConvTransposeAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    x = first_type(types)
    w = input_type(types, 1, "weights")
    if x.shape is None or w.shape is None:
        return [TensorType(x.dtype, None)]
    check(attrs.group >= 1, f"group must be >= 1, got {attrs.group}")
    if isinstance(x.shape[1], int) and isinstance(w.shape[0], int):
        check(x.shape[1] == w.shape[0], f"input has {x.shape[1]} channels but weights expect {w.shape[0]}")
    geo = conv_transpose_geometry(attrs, x.shape, w.shape)
    channels = w.shape[1] * attrs.group if isinstance(w.shape[1], int) else None
    return [TensorType(x.dtype, (x.shape[0], channels, *geo.out))]


def window(y: np.ndarray, begins: Sequence[int], sizes: Sequence[int]) -> np.ndarray:
    """y[..., b:b+size] per spatial axis, reading zeros outside y (negative pads, output_padding)."""
    result = np.zeros((*y.shape[:2], *sizes), dtype=y.dtype)
    source, target = [slice(None)] * 2, [slice(None)] * 2
    for b, size, length in zip(begins, sizes, y.shape[2:]):
        lo, hi = max(b, 0), min(b + size, length)
        source.append(slice(lo, max(hi, lo)))
        target.append(slice(lo - b, lo - b + max(hi - lo, 0)))
    result[tuple(target)] = y[tuple(source)]
    return result


def conv_transpose_weight(attrs: object, values: Sequence[np.ndarray | None]) -> tuple[int, int] | None:
    """Constant weights [C, M/group, *kernel]: output channels on axis 1."""
    w = values[1] if len(values) > 1 else None
    return None if w is None else (1, 1 if w.ndim > 1 else 0)


def conv_transpose_workspace(
    attrs: ConvTransposeAttrs, inputs: Sequence[TensorType | None], outputs: Sequence[TensorType | None]
) -> int:
    """What ``conv_transpose`` allocates beyond its operands: the GEMM's columns (every kernel tap
    of every input pixel, per output channel) twice (einsum's result and its reshaped copy at
    worst), the scattered sum before cropping, and two more copies of the output (window, bias)."""
    x = inputs[0] if inputs else None
    w = inputs[1] if len(inputs) > 1 else None
    y = outputs[0] if outputs else None
    if x is None or w is None or y is None or not (x.is_concrete and w.is_concrete and y.is_concrete):
        return 0
    geo = conv_transpose_geometry(attrs, x.dims, w.dims)
    extra = attrs.output_padding or (0,) * len(geo.kernel)
    spans = [
        (i - 1) * s + (k - 1) * d + 1 + e
        for i, s, k, d, e in zip(x.dims[2:], geo.strides, geo.kernel, geo.dilations, extra)
    ]
    images_channels = y.dims[0] * y.dims[1]
    columns = images_channels * math.prod(geo.kernel) * math.prod(x.dims[2:])
    scattered = images_channels * math.prod(spans)
    return np.dtype(y.dtype).itemsize * (2 * columns + scattered + 2 * math.prod(y.dims))


@register_op(
    "ConvTranspose",
    attrs=ConvTransposeAttrs,
    infer=infer_conv_transpose,
    inputs=(2, 3),
    per_sample=each_image,
    weight=conv_transpose_weight,
    macs=conv_transpose_macs,
    workspace=conv_transpose_workspace,
)
def conv_transpose(
    attrs: ConvTransposeAttrs, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
) -> np.ndarray:
    """GEMM to columns, then col2im: every input pixel scatters a kernel-sized patch."""
    geo = conv_transpose_geometry(attrs, x.shape, w.shape)
    assert geo.begins is not None
    n, groups, rank = x.shape[0], attrs.group, len(geo.kernel)
    in_per_group, out_per_group = x.shape[1] // groups, w.shape[1]
    spatial_in = x.shape[2:]
    xs = x.reshape(n, groups, in_per_group, -1)  # (N, G, Cg, P)
    ws = w.reshape(groups, in_per_group, out_per_group * int(np.prod(geo.kernel)))
    cols = np.einsum("ngcp,gcm->ngmp", xs, ws, optimize=True)
    cols = cols.reshape(n, groups * out_per_group, *geo.kernel, *spatial_in)
    full = [
        (i - 1) * s + (k - 1) * d + 1
        for i, s, k, d in zip(spatial_in, geo.strides, geo.kernel, geo.dilations)
    ]
    accumulator = np.float64 if x.dtype == np.float64 else np.float32
    scattered = np.zeros((n, groups * out_per_group, *full), dtype=accumulator)
    for tap in np.ndindex(*geo.kernel):
        target = tuple(
            slice(t * d, t * d + (i - 1) * s + 1, s)
            for t, d, i, s in zip(tap, geo.dilations, spatial_in, geo.strides)
        )
        scattered[(slice(None), slice(None), *target)] += cols[(slice(None), slice(None), *tap)]
    y = window(scattered, geo.begins, concrete_dims(geo.out))
    if b is not None:
        y = y + b.reshape(-1, *([1] * rank))
    return np.asarray(y, dtype=x.dtype, order="C")
