"""Elementwise arithmetic, comparison and logic with numpy broadcasting; Where and Cast."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.ir.dtypes import SUPPORTED_DTYPES
from edgecnn.ir.graph import TensorType
from edgecnn.ops.activation import erf_of
from edgecnn.ops.common import broadcast_shapes, check, first_type, input_type, required_types, same_as_first
from edgecnn.ops.registry import IntoAdapter, NoAttrs, ReferenceFn, ReferenceIntoFn, register_op
from edgecnn.ops.traits import broadcast_per_image, one_dtype


def broadcast_type(dtype: str, types: Sequence[TensorType | None]) -> TensorType:
    present = required_types(types, "every input is required")
    return TensorType(dtype, broadcast_shapes(*(t.shape for t in present)))


def _same_dtypes(types: Sequence[TensorType | None]) -> str:
    dtypes = {t.dtype for t in types if t is not None}
    check(len(dtypes) == 1, f"inputs must share one element type, got {sorted(dtypes)}")
    return dtypes.pop()


def infer_arithmetic(attrs: object, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    return [broadcast_type(_same_dtypes(types), types)]


def infer_comparison(attrs: object, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    _same_dtypes(types)
    return [broadcast_type("bool", types)]


def divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncates toward zero (C semantics), unlike numpy's floor division."""
    if a.dtype.kind not in "iu":
        return a / b
    q = np.floor_divide(a, b)
    inexact = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return q + inexact.astype(q.dtype)


BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": divide,
}


def binary_into(ufunc: np.ufunc, floats_only: bool = False) -> ReferenceIntoFn:
    """The binary reference as ``ufunc(a, b, out=)`` when the inputs and the output share one
    element type (Div only for floats: the reference truncates integer quotients); the output may
    take the place of an input of its own type."""

    def into(
        attrs: object, in_types: Sequence[TensorType | None], out_types: Sequence[TensorType]
    ) -> IntoAdapter | None:
        out = out_types[0]
        if len(in_types) != 2 or None in in_types or not one_dtype(*in_types, *out_types):
            return None
        if floats_only and np.dtype(out.dtype).kind != "f":
            return None

        def run(result: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
            ufunc(a, b, out=result)

        return IntoAdapter(run, tuple(i for i, t in enumerate(in_types) if t == out))

    return into


BINARY_INTO: dict[str, ReferenceIntoFn] = {
    "Add": binary_into(np.add),
    "Sub": binary_into(np.subtract),
    "Mul": binary_into(np.multiply),
    "Div": binary_into(np.divide, floats_only=True),
}
COMPARISONS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Equal": np.equal,
    "Greater": np.greater,
    "Less": np.less,
    "GreaterOrEqual": np.greater_equal,
    "LessOrEqual": np.less_equal,
    "And": np.logical_and,
    "Or": np.logical_or,
    "Xor": np.logical_xor,
}
VARIADIC: dict[str, Callable[[Sequence[np.ndarray]], np.ndarray]] = {
    "Max": lambda xs: _fold(np.maximum, xs),
    "Min": lambda xs: _fold(np.minimum, xs),
    "Sum": lambda xs: _fold(np.add, xs),
    "Mean": lambda xs: _fold(np.add, xs) / len(xs),
}
UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Sqrt": np.sqrt,
    "Exp": np.exp,
    "Log": np.log,
    "Neg": np.negative,
    "Abs": np.abs,
    "Reciprocal": np.reciprocal,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.round,  # half to even, as ONNX specifies
    "Sign": np.sign,
    "Erf": erf_of,
    "Sin": np.sin,
    "Cos": np.cos,
    "Tan": np.tan,
    "Asin": np.arcsin,
    "Acos": np.arccos,
    "Atan": np.arctan,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Asinh": np.arcsinh,
    "Acosh": np.arccosh,
    "Atanh": np.arctanh,
    "Not": np.logical_not,
}


def _fold(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], xs: Sequence[np.ndarray]) -> np.ndarray:
    result = xs[0]
    for x in xs[1:]:
        result = fn(result, x)
    return result


def _typed(dtype: np.dtype, value: np.ndarray) -> np.ndarray:
    return np.asarray(value).astype(dtype, copy=False)


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> ReferenceFn:
    def binary(attrs: NoAttrs, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _typed(a.dtype, fn(a, b))

    return binary


def _compare(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> ReferenceFn:
    def compare(attrs: NoAttrs, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(fn(a, b))

    return compare


def _variadic(fn: Callable[[Sequence[np.ndarray]], np.ndarray]) -> ReferenceFn:
    def variadic(attrs: NoAttrs, *xs: np.ndarray) -> np.ndarray:
        return _typed(xs[0].dtype, fn(xs))

    return variadic


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> ReferenceFn:
    def unary(attrs: NoAttrs, x: np.ndarray) -> np.ndarray:
        return _typed(x.dtype, fn(x))

    return unary


def _register_tables() -> None:
    for name, binary in BINARY.items():
        register_op(
            name,
            infer=infer_arithmetic,
            inputs=2,
            per_sample=broadcast_per_image,
            reference_into=BINARY_INTO[name],
        )(_binary(binary))
    for name, compare in COMPARISONS.items():
        register_op(name, infer=infer_comparison, inputs=2, per_sample=broadcast_per_image)(_compare(compare))
    for name, variadic in VARIADIC.items():
        register_op(name, infer=infer_arithmetic, inputs=(1, None), per_sample=broadcast_per_image)(
            _variadic(variadic)
        )
    for name, unary in UNARY.items():
        register_op(name, infer=same_as_first, per_sample=broadcast_per_image)(_unary(unary))


_register_tables()


def infer_pow(attrs: object, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    return [broadcast_type(first_type(types).dtype, types)]


@register_op("Pow", infer=infer_pow, inputs=2, per_sample=broadcast_per_image)
def power(attrs: NoAttrs, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        return _typed(x.dtype, np.power(x, y.astype(x.dtype)))
    return _typed(x.dtype, np.power(x.astype(np.float64), y.astype(np.float64)))


@dataclass(frozen=True)
class ModAttrs:
    fmod: bool = False  # True: sign of the dividend (C fmod); False: sign of the divisor


@register_op("Mod", attrs=ModAttrs, infer=infer_arithmetic, inputs=2, per_sample=broadcast_per_image)
def mod(attrs: ModAttrs, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _typed(a.dtype, np.fmod(a, b) if attrs.fmod else np.mod(a, b))


def infer_where(attrs: object, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    condition = required_types(types, "Where needs condition, X and Y")[0]
    check(condition.dtype == "bool", f"condition must be bool, got {condition.dtype}")
    return [broadcast_type(_same_dtypes(types[1:]), types)]


@register_op("Where", infer=infer_where, inputs=3, per_sample=broadcast_per_image)
def where(attrs: NoAttrs, condition: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(condition, x, y)


@dataclass(frozen=True)
class CastAttrs:
    to: str  # an edgecnn dtype name ("float32", "int64", ...)


def infer_cast(attrs: CastAttrs, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    check(attrs.to in SUPPORTED_DTYPES, f"cannot cast to {attrs.to}")
    return [TensorType(attrs.to, first_type(types).shape)]


@register_op("Cast", attrs=CastAttrs, infer=infer_cast, per_sample=broadcast_per_image)
def cast(attrs: CastAttrs, x: np.ndarray) -> np.ndarray:
    return x.astype(attrs.to)


def infer_cast_like(attrs: object, types: Sequence[TensorType | None], values: object) -> list[TensorType]:
    target = input_type(types, 1, "target_type")
    return [TensorType(target.dtype, first_type(types).shape)]


@register_op("CastLike", infer=infer_cast_like, inputs=2, per_sample=broadcast_per_image)
def cast_like(attrs: NoAttrs, x: np.ndarray, like: np.ndarray) -> np.ndarray:
    return x.astype(like.dtype)
