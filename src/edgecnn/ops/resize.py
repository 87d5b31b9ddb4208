"""Resize (nearest, linear, cubic; every ONNX coordinate mode), applied separably axis by axis."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import Dim, TensorType
from edgecnn.ops.common import check, first_type, normalize_axis
from edgecnn.ops.registry import register_op

COORDINATE_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
ASPECT_POLICIES = ("stretch", "not_larger", "not_smaller")


@dataclass(frozen=True)
class ResizeAttrs:
    mode: str = "nearest"  # nearest, linear or cubic
    coordinate_transformation_mode: str = "half_pixel"
    nearest_mode: str = "round_prefer_floor"
    cubic_coeff_a: float = -0.75
    exclude_outside: bool = False
    extrapolation_value: float = 0.0
    axes: tuple[int, ...] = ()  # empty: scales/sizes cover every axis
    keep_aspect_ratio_policy: str = "stretch"


def check_attrs(attrs: ResizeAttrs) -> None:
    check(
        attrs.mode in ("nearest", "linear", "cubic"), f"mode {attrs.mode!r} is not nearest, linear or cubic"
    )
    check(
        attrs.coordinate_transformation_mode in COORDINATE_MODES,
        f"coordinate_transformation_mode {attrs.coordinate_transformation_mode!r} is not supported",
    )
    check(attrs.nearest_mode in NEAREST_MODES, f"nearest_mode {attrs.nearest_mode!r} is not supported")
    check(
        attrs.keep_aspect_ratio_policy in ASPECT_POLICIES,
        f"{attrs.keep_aspect_ratio_policy!r} is not a policy",
    )


def _full(axes: list[int], values: np.ndarray, rank: int, fill: float) -> list[float]:
    result = [fill] * rank
    for a, v in zip(axes, values.reshape(-1)):
        result[a] = float(v)
    return result


def output_geometry(
    attrs: ResizeAttrs, in_shape: Sequence[Dim], scales: np.ndarray | None, sizes: np.ndarray | None
) -> tuple[list[Dim], list[float | None]]:
    """Output dims and the per-axis scale used by the coordinate transform."""
    rank = len(in_shape)
    axes = [normalize_axis(a, rank) for a in attrs.axes] or list(range(rank))
    given = sizes if sizes is not None and sizes.size else None
    if given is not None:
        check(given.size == len(axes), f"sizes has {given.size} values for {len(axes)} axes")
        wanted = _full(axes, given, rank, 0)
        out: list[Dim] = [int(wanted[i]) if i in axes else in_shape[i] for i in range(rank)]
        if attrs.keep_aspect_ratio_policy != "stretch":
            known = {a: d for a in axes if isinstance(d := in_shape[a], int)}
            if len(known) != len(axes):
                return [None if i in axes else d for i, d in enumerate(in_shape)], [None] * rank
            ratios = [wanted[a] / known[a] for a in axes]
            common = min(ratios) if attrs.keep_aspect_ratio_policy == "not_larger" else max(ratios)
            out = [int(np.floor(common * known[i] + 0.5)) if i in axes else in_shape[i] for i in range(rank)]
            return out, [common if i in axes else 1.0 for i in range(rank)]
        ratio = [
            o / d if isinstance(o, int) and isinstance(d, int) and d else None for o, d in zip(out, in_shape)
        ]
        return out, ratio
    check(
        scales is not None and scales.size == len(axes), "Resize needs either scales or sizes for every axis"
    )
    assert scales is not None  # check() above raised otherwise
    full = _full(axes, scales, rank, 1.0)
    check(all(s > 0 for s in full), f"scales {full} must be positive")
    out = [int(np.floor(d * s)) if isinstance(d, int) else None for d, s in zip(in_shape, full)]
    return out, list(full)


def infer_resize(
    attrs: ResizeAttrs, types: Sequence[TensorType | None], values: Sequence
) -> list[TensorType]:
    check_attrs(attrs)
    x = first_type(types)
    scales_given = len(types) > 2 and types[2] is not None
    sizes_given = len(types) > 3 and types[3] is not None
    scales = values[2] if scales_given else None
    sizes = values[3] if sizes_given else None
    if x.shape is None:
        return [x]
    if (scales_given and scales is None) or (sizes_given and sizes is None):
        return [TensorType(x.dtype, (None,) * len(x.shape))]
    out, _ = output_geometry(attrs, x.shape, scales, sizes)
    return [TensorType(x.dtype, tuple(out))]


def source_coordinates(
    attrs: ResizeAttrs, out_len: int, in_len: int, scale: float, roi: tuple[float, float]
) -> np.ndarray:
    """Where each output index samples the input, in input pixel units.

    align_corners uses the unrounded resized length in_len * scale, as ONNX specifies.
    """
    x = np.arange(out_len, dtype=np.float64)
    mode = attrs.coordinate_transformation_mode
    if mode == "asymmetric":
        return x / scale
    if mode == "align_corners":
        resized = in_len * scale
        return np.zeros(out_len) if resized <= 1 else x * (in_len - 1) / (resized - 1)
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out_len > 1 else np.zeros(out_len)
    if mode == "half_pixel_symmetric":
        adjustment = out_len / (scale * in_len)
        offset = in_len / 2 * (1 - adjustment)
        return offset + (x + 0.5) / scale - 0.5
    if mode == "tf_crop_and_resize":
        start, end = roi
        if out_len == 1:
            return np.full(out_len, 0.5 * (start + end) * (in_len - 1))
        return start * (in_len - 1) + x * (end - start) * (in_len - 1) / (out_len - 1)
    return (x + 0.5) / scale - 0.5  # half_pixel


def _round_prefer_floor(c: np.ndarray) -> np.ndarray:
    return np.ceil(c - 0.5)


def _round_prefer_ceil(c: np.ndarray) -> np.ndarray:
    return np.floor(c + 0.5)


_ROUNDING: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "round_prefer_floor": _round_prefer_floor,
    "round_prefer_ceil": _round_prefer_ceil,
    "floor": np.floor,
    "ceil": np.ceil,
}


def nearest_indices(attrs: ResizeAttrs, coords: np.ndarray, in_len: int) -> np.ndarray:
    rounding = _ROUNDING[attrs.nearest_mode]
    return np.clip(rounding(coords), 0, in_len - 1).astype(np.int64)


def cubic_weights(a: float, t: np.ndarray) -> np.ndarray:
    """Keys' cubic convolution weights for taps at offsets -1, 0, 1, 2 (shape (len(t), 4))."""
    d = np.stack([t + 1, t, 1 - t, 2 - t], axis=1)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, far)


def interpolation_taps(attrs: ResizeAttrs, coords: np.ndarray, in_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Input indices (out_len, taps) and their weights for linear or cubic interpolation."""
    if attrs.mode == "linear":
        c = np.clip(coords, 0, in_len - 1)
        low = np.floor(c)
        t = (c - low)[:, None]
        index = np.stack([low, low + 1], axis=1)
        weights = np.concatenate([1 - t, t], axis=1)
    else:
        low = np.floor(coords)
        index = low[:, None] + np.arange(-1, 3)
        weights = cubic_weights(attrs.cubic_coeff_a, coords - low)
        if attrs.exclude_outside:
            weights = np.where((index >= 0) & (index < in_len), weights, 0)
            weights = weights / weights.sum(axis=1, keepdims=True)
    return np.clip(index, 0, in_len - 1).astype(np.int64), weights


def resize_axis(
    attrs: ResizeAttrs, x: np.ndarray, axis: int, out_len: int, scale: float, roi: tuple[float, float]
) -> np.ndarray:
    in_len = x.shape[axis]
    coords = source_coordinates(attrs, out_len, in_len, scale, roi)
    if attrs.mode == "nearest":
        result = np.take(x, nearest_indices(attrs, coords, in_len), axis=axis)
    else:
        index, weights = interpolation_taps(attrs, coords, in_len)
        moved = np.moveaxis(x, axis, -1).astype(np.float64)
        result = np.moveaxis((moved[..., index] * weights).sum(axis=-1), -1, axis)
    if attrs.coordinate_transformation_mode == "tf_crop_and_resize":
        outside = (coords < 0) | (coords > in_len - 1)
        if outside.any():
            mask_shape = [1] * x.ndim
            mask_shape[axis] = out_len
            result = np.where(outside.reshape(mask_shape), attrs.extrapolation_value, result)
    return result


INTERPOLATION_TAPS = {"nearest": 0, "linear": 2, "cubic": 4}
"""Input values each output value of one axis mixes (nearest takes, without float64 copies)."""


def resize_workspace(
    attrs: ResizeAttrs, inputs: Sequence[TensorType | None], outputs: Sequence[TensorType | None]
) -> int:
    """What ``resize`` allocates beyond its operands, axis after axis, on arrays at most as large as
    the larger of input and output along every axis: nearest, one taken copy per axis; linear and
    cubic, the input as float64, the gathered taps and their weighted copy (float64 per tap), the
    sum, and the cast back; plus each axis's coordinates, indices and weights (float64, int64)."""
    x = inputs[0] if inputs else None
    y = outputs[0] if outputs else None
    if x is None or y is None or not (x.is_concrete and y.is_concrete) or len(x.dims) != len(y.dims):
        return 0
    largest = math.prod(max(i, o) for i, o in zip(x.dims, y.dims))
    taps = INTERPOLATION_TAPS.get(attrs.mode, 4)
    coordinates = sum(y.dims) * (32 + 16 * taps)
    itemsize = np.dtype(y.dtype).itemsize
    if taps == 0:
        return 2 * largest * itemsize + coordinates
    return largest * (8 * (2 * taps + 2) + itemsize) + coordinates


@register_op("Resize", attrs=ResizeAttrs, infer=infer_resize, inputs=(1, 4), workspace=resize_workspace)
def resize(
    attrs: ResizeAttrs,
    x: np.ndarray,
    roi: np.ndarray | None = None,
    scales: np.ndarray | None = None,
    sizes: np.ndarray | None = None,
) -> np.ndarray:
    check_attrs(attrs)
    out, ratios = output_geometry(attrs, x.shape, scales, sizes)
    rank = x.ndim
    axes = [normalize_axis(a, rank) for a in attrs.axes] or list(range(rank))
    starts, ends = [0.0] * rank, [1.0] * rank
    if roi is not None and roi.size:
        check(roi.size == 2 * len(axes), f"roi has {roi.size} values for {len(axes)} axes")
        flat = roi.reshape(-1).astype(np.float64)
        for i, a in enumerate(axes):
            starts[a], ends[a] = flat[i], flat[i + len(axes)]
    y = x
    for axis in range(rank):
        if (
            out[axis] == x.shape[axis]
            and ratios[axis] == 1.0
            and attrs.coordinate_transformation_mode != "tf_crop_and_resize"
        ):
            continue
        size, ratio = out[axis], ratios[axis]
        # out holds ints for an array's shape; a ratio is None only where sizes meet an axis of size 0
        check(ratio is not None, f"cannot resize axis {axis}: it has size 0")
        assert isinstance(size, int) and ratio is not None
        y = resize_axis(attrs, y, axis, size, float(ratio), (starts[axis], ends[axis]))
    return np.asarray(y, order="C").astype(x.dtype, copy=False) if y is not x else x.copy()
