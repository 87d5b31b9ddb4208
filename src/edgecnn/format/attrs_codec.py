"""Operator attributes <-> JSON, driven by the field types each op's attrs dataclass declares.

No per-op code: a new op (or a new attrs field) is stored as soon as it is registered, as long as its
fields use the types below. Arrays go to the tensor table and appear as ``{"tensor": name}``;
non-finite floats appear as ``{"float": "inf" | "-inf" | "nan"}`` so the JSON stays strict.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from collections.abc import Callable
from typing import Any

import numpy as np

from edgecnn.errors import GraphError
from edgecnn.format.checked_json import CheckedJson, kind_of
from edgecnn.format.errors import EcnnFormatError
from edgecnn.ir.graph import Node

TensorSink = Callable[[np.ndarray, str], str]
"""(array, where it was found) -> the name it has in the tensor table."""
TensorSource = Callable[[str, str], np.ndarray]
"""(tensor table name, JSON path) -> the array, or an EcnnFormatError."""

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


class _Mismatch(Exception):
    """A value does not fit a declared type (may be retried with another Union member)."""


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """Resolved annotations of an attrs dataclass (string annotations evaluated once)."""
    return typing.get_type_hints(cls)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _is_array_type(tp: Any) -> bool:
    return tp is np.ndarray or typing.get_origin(tp) is np.ndarray


def _is_enum_type(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def _takes_no_attrs(cls: type) -> bool:
    """Ops whose attrs class has no fields may keep ``attrs=None`` (Node's default)."""
    return dataclasses.is_dataclass(cls) and not dataclasses.fields(cls)


# ------------------------------------------------------------------ encode
def encode_attrs(node: Node, attrs_type: type, sink: TensorSink) -> dict[str, Any] | None:
    """JSON object for ``node.attrs`` (None stays None); GraphError if it cannot be stored."""
    if node.attrs is None and not _takes_no_attrs(attrs_type):
        raise GraphError(
            f"cannot save node {node}: it has no attrs, but {node.op} needs a {attrs_type.__name__}"
        )
    if node.attrs is None:
        return None
    if type(node.attrs) is not attrs_type:
        raise GraphError(
            f"cannot save node {node}: its attrs is a {type(node.attrs).__name__}, "
            f"but {node.op} is registered with {attrs_type.__name__}"
        )
    try:
        return _encode_dataclass(node.attrs, attrs_type, "attrs", sink)
    except _Mismatch as err:
        raise GraphError(f"cannot save node {node}: {err}") from None


def _encode_dataclass(value: Any, cls: type, where: str, sink: TensorSink) -> dict[str, Any]:
    if not isinstance(value, cls):
        raise _Mismatch(f"{where}: expected {cls.__name__}, got {type(value).__name__}")
    hints = field_types(cls)
    return {
        f.name: _encode(getattr(value, f.name), hints[f.name], f"{where}.{f.name}", sink)
        for f in dataclasses.fields(cls)
        if f.init
    }


def _encode(value: Any, tp: Any, where: str, sink: TensorSink) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None) or tp is None:
        if value is None:
            return None
    elif tp is bool:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
    elif tp is int:
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            if not INT64_MIN <= int(value) <= INT64_MAX:
                raise _Mismatch(f"{where}: {value} is outside the int64 range")
            return int(value)
    elif tp is float:
        if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
            value, (bool, np.bool_)
        ):
            number = float(value)
            if math.isfinite(number):
                return number
            return {"float": "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")}
    elif tp is str:
        if isinstance(value, str):
            return value
    elif _is_union(tp):
        for member in sorted(args, key=lambda m: type(value) is not m):  # an exact type match first
            try:
                return _encode(value, member, where, sink)
            except _Mismatch:
                continue
    elif origin is typing.Literal:
        if value in args and isinstance(value, (str, int, bool)):
            return value
    elif origin is tuple:
        if isinstance(value, (tuple, list)):
            if len(args) == 2 and args[1] is Ellipsis:
                return [_encode(item, args[0], f"{where}[{i}]", sink) for i, item in enumerate(value)]
            if len(value) == len(args):
                return [
                    _encode(item, t, f"{where}[{i}]", sink) for i, (item, t) in enumerate(zip(value, args))
                ]
    elif origin is list:
        if isinstance(value, (tuple, list)):
            return [_encode(item, args[0], f"{where}[{i}]", sink) for i, item in enumerate(value)]
    elif origin is dict:
        if args[0] is not str:
            raise _Mismatch(f"{where}: only dicts with str keys can be stored, not {tp}")
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {k: _encode(v, args[1], f"{where}.{k}", sink) for k, v in value.items()}
    elif _is_array_type(tp):
        if isinstance(value, np.ndarray):
            return {"tensor": sink(value, where)}
    elif _is_enum_type(tp):
        if isinstance(value, tp):
            return value.name
    elif dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _encode_dataclass(value, tp, where, sink)
    else:
        raise _Mismatch(f"{where}: fields of type {tp} cannot be stored in .ecnn")
    raise _Mismatch(f"{where}: {type(value).__name__} value {value!r} does not match the declared type {tp}")


# ------------------------------------------------------------------ decode
def decode_attrs(data: Any, attrs_type: type, where: str, check: CheckedJson, source: TensorSource) -> Any:
    """Rebuild an attrs object from its JSON; every problem is an EcnnFormatError at ``where``."""
    if data is None:
        if not _takes_no_attrs(attrs_type):
            check.fail(f"attrs is null, but this operator needs a {attrs_type.__name__}", where)
        return None
    try:
        field_types(attrs_type)
    except Exception as err:  # an unresolvable annotation is a bug in the op, reported at the node
        check.fail(f"the type hints of {attrs_type.__name__} cannot be resolved: {err}", where)
    return _decode_dataclass(data, attrs_type, where, check, source)


def _decode_dataclass(data: Any, cls: type, where: str, check: CheckedJson, source: TensorSource) -> Any:
    obj = check.expect(data, dict, where)
    hints = field_types(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    unknown = sorted(set(obj) - {f.name for f in fields})
    if unknown:
        check.fail(
            f"{cls.__name__} has no field(s) {', '.join(unknown)} (file written by a newer edgecnn?)", where
        )
    values = {}
    for f in fields:
        if f.name in obj:
            values[f.name] = _decode(obj[f.name], hints[f.name], f"{where}.{f.name}", check, source)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            check.fail(f"missing required field '{f.name}' of {cls.__name__}", where)
    try:
        return cls(**values)
    except Exception as err:  # the attrs class validates its own values; any refusal is a format error
        check.fail(f"{cls.__name__} refuses these values: {err}", where)


def _decode(data: Any, tp: Any, where: str, check: CheckedJson, source: TensorSource) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None) or tp is None:
        if data is None:
            return None
    elif tp is bool:
        if isinstance(data, bool):
            return data
    elif tp is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return check.integer(data, where, INT64_MIN, INT64_MAX)
    elif tp is float:
        return _decode_float(data, where, check)
    elif tp is str:
        if isinstance(data, str):
            return data
    elif _is_union(tp):
        return _decode_union(data, args, where, check, source)
    elif origin is typing.Literal:
        if any(data == a and type(data) is type(a) for a in args):
            return data
        check.fail(f"expected one of {list(args)}, got {data!r}", where)
    elif origin in (tuple, list):
        items = check.expect(data, list, where)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(items) != len(args):
                check.fail(f"expected {len(args)} items, got {len(items)}", where)
            item_types = list(args)
        else:
            item_types = [args[0]] * len(items)
        decoded = [
            _decode(x, t, f"{where}[{i}]", check, source) for i, (x, t) in enumerate(zip(items, item_types))
        ]
        return tuple(decoded) if origin is tuple else decoded
    elif origin is dict:
        obj = check.expect(data, dict, where)
        return {k: _decode(v, args[1], f"{where}.{k}", check, source) for k, v in obj.items()}
    elif _is_array_type(tp):
        ref = check.expect(data, dict, where)
        if set(ref) != {"tensor"}:
            check.fail('expected a tensor reference {"tensor": name}', where)
        return source(check.expect(ref["tensor"], str, f"{where}.tensor"), where)
    elif _is_enum_type(tp):
        name = check.expect(data, str, where)
        if name not in tp.__members__:
            check.fail(f"'{name}' is not a valid {tp.__name__} (one of {', '.join(tp.__members__)})", where)
        return tp[name]
    elif dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _decode_dataclass(data, tp, where, check, source)
    else:
        check.fail(f"fields of type {tp} cannot be read from .ecnn", where)
    check.fail(f"expected a value of type {getattr(tp, '__name__', tp)}, got {kind_of(data)}", where)


def _decode_float(data: Any, where: str, check: CheckedJson) -> float:
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        try:
            return float(data)
        except OverflowError:
            check.fail(f"integer {data} is too large for a float", where)
    if isinstance(data, dict) and set(data) == {"float"} and data["float"] in _NON_FINITE:
        return _NON_FINITE[data["float"]]
    check.fail(f'expected a number or {{"float": "inf" | "-inf" | "nan"}}, got {kind_of(data)}', where)


def _decode_union(
    data: Any, members: tuple[Any, ...], where: str, check: CheckedJson, source: TensorSource
) -> Any:
    """The first member that takes the value, preferring an exact kind (a JSON integer is an int
    before it is a float)."""
    if data is None and type(None) in members:
        return None
    non_none = [m for m in members if m is not type(None)]
    if len(non_none) == 1:  # Optional[X]: X's own error is the most precise
        return _decode(data, non_none[0], where, check, source)
    exact_first = sorted(non_none, key=lambda m: m is float and isinstance(data, int))
    for member in exact_first:
        try:
            return _decode(data, member, where, check, source)
        except EcnnFormatError:
            continue
    names = " | ".join(getattr(m, "__name__", str(m)) for m in members)
    check.fail(f"expected {names}, got {kind_of(data)}", where)
