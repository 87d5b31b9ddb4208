"""Reductions over axes (axes as an input, opset 18 style) and ArgMax/ArgMin."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import TensorType
from edgecnn.ops.common import check, concrete_ints, first_type, normalize_axis, shown
from edgecnn.ops.registry import register_op
from edgecnn.ops.traits import axis_not_batch


@dataclass(frozen=True)
class ReduceAttrs:
    keepdims: bool = True
    noop_with_empty_axes: bool = False


def reduced_axes(attrs: ReduceAttrs, rank: int, axes: list[int] | None) -> tuple[int, ...] | None:
    """Normalised axes; () means identity (noop_with_empty_axes), None means every axis."""
    if not axes:
        return () if attrs.noop_with_empty_axes else None
    normalized = tuple(sorted({normalize_axis(a, rank) for a in axes}))
    check(len(normalized) == len(axes), f"axes {shown(axes)} repeat an axis")
    return normalized


def infer_reduce(
    attrs: ReduceAttrs, types: Sequence[TensorType | None], values: Sequence
) -> list[TensorType]:
    x = first_type(types)
    axes_given = len(types) > 1 and types[1] is not None
    axes_value = concrete_ints(values[1]) if axes_given else []
    if x.shape is None or axes_value is None:
        rank = x.rank if attrs.keepdims else None
        return [TensorType(x.dtype, None if rank is None else (None,) * rank)]
    axes = reduced_axes(attrs, len(x.shape), axes_value)
    if axes == ():
        return [x]
    chosen = set(range(len(x.shape)) if axes is None else axes)
    if attrs.keepdims:
        shape = tuple(1 if i in chosen else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in chosen)
    return [TensorType(x.dtype, shape)]


def _log_sum_exp(x: np.ndarray, axis: tuple[int, ...] | None, keepdims: bool) -> np.ndarray:
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims))
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)
    total = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return total if keepdims else np.squeeze(total, axis=axis)


def _extreme(
    fn: Callable[..., np.ndarray], largest: bool
) -> Callable[[np.ndarray, tuple[int, ...] | None, bool], np.ndarray]:
    """Max/min whose value over an empty set is the identity (-inf/+inf, or the integer limit)."""

    def reduce(x: np.ndarray, axis: tuple[int, ...] | None, keepdims: bool) -> np.ndarray:
        if x.size:
            return fn(x, axis=axis, keepdims=keepdims)
        if x.dtype == np.bool_:
            identity: object = not largest
        elif x.dtype.kind == "f":
            identity = -np.inf if largest else np.inf
        else:
            info = np.iinfo(x.dtype)
            identity = info.min if largest else info.max
        return np.full(np.sum(x, axis=axis, keepdims=keepdims).shape, identity, dtype=x.dtype)

    return reduce


REDUCTIONS: dict[str, Callable[[np.ndarray, tuple[int, ...] | None, bool], np.ndarray]] = {
    "ReduceSum": lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    "ReduceMean": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "ReduceMax": _extreme(np.max, largest=True),
    "ReduceMin": _extreme(np.min, largest=False),
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt(np.sum(np.square(x), axis=a, keepdims=k)),
    "ReduceSumSquare": lambda x, a, k: np.sum(np.square(x), axis=a, keepdims=k),
    "ReduceLogSum": lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
    "ReduceLogSumExp": _log_sum_exp,
}


def _register(name: str, fn: Callable[[np.ndarray, tuple[int, ...] | None, bool], np.ndarray]) -> None:
    def reference(attrs: ReduceAttrs, x: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
        chosen = reduced_axes(attrs, x.ndim, concrete_ints(axes) or [])
        if chosen == ():
            return x.copy()
        work = x.astype(np.float64) if x.dtype.kind == "f" else x
        return np.asarray(fn(work, chosen, attrs.keepdims)).astype(x.dtype)

    reference.__name__ = name.lower()
    register_op(name, attrs=ReduceAttrs, infer=infer_reduce, inputs=(1, 2))(reference)


for _name, _fn in REDUCTIONS.items():
    _register(_name, _fn)


@dataclass(frozen=True)
class ArgAttrs:
    axis: int = 0
    keepdims: bool = True
    select_last_index: bool = False


def infer_arg(attrs: ArgAttrs, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    x = first_type(types)
    if x.shape is None:
        return [TensorType("int64", None)]
    axis = normalize_axis(attrs.axis, len(x.shape))
    if attrs.keepdims:
        return [TensorType("int64", tuple(1 if i == axis else d for i, d in enumerate(x.shape)))]
    return [TensorType("int64", tuple(d for i, d in enumerate(x.shape) if i != axis))]


def _arg(x: np.ndarray, attrs: ArgAttrs, fn: Callable[..., np.ndarray]) -> np.ndarray:
    axis = normalize_axis(attrs.axis, x.ndim)
    if attrs.select_last_index:
        flipped = np.flip(x, axis=axis)
        index = x.shape[axis] - 1 - fn(flipped, axis=axis)
    else:
        index = fn(x, axis=axis)
    index = np.asarray(index, dtype=np.int64)
    return np.expand_dims(index, axis) if attrs.keepdims else index


@register_op("ArgMax", attrs=ArgAttrs, infer=infer_arg, per_sample=axis_not_batch)
def arg_max(attrs: ArgAttrs, x: np.ndarray) -> np.ndarray:
    return _arg(x, attrs, np.argmax)


@register_op("ArgMin", attrs=ArgAttrs, infer=infer_arg, per_sample=axis_not_batch)
def arg_min(attrs: ArgAttrs, x: np.ndarray) -> np.ndarray:
    return _arg(x, attrs, np.argmin)
