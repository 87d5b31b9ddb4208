"""ONNX converter registry: one converter per ONNX op (or family), mapping ONNX attributes and
opset differences to edgecnn's op attributes once, at the boundary.

A converter receives an :class:`OnnxNode` and returns the edgecnn Nodes that implement it
(usually one). Raising ValueError marks the node as malformed; the reader turns it into a
ModelFormatError that names the node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgecnn.ir.graph import Node


@dataclass
class OnnxNode:
    """What a converter sees of one ONNX NodeProto."""

    op_type: str
    name: str
    inputs: list[str]  # "" marks an omitted optional input
    outputs: list[str]
    attributes: dict[str, Any]  # decoded: int, float, str, list[int|float|str], np.ndarray (tensor)
    opset: int  # the model's opset version for this node's domain
    initializers: dict[str, np.ndarray]  # constant tensors known so far (read-only)
    new_constants: dict[str, np.ndarray] = field(default_factory=dict)

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attributes.get(key, default)

    def constant(self, index: int) -> np.ndarray | None:
        """Value of input ``index`` if it is an initializer (or earlier Constant), else None."""
        if index >= len(self.inputs) or not self.inputs[index]:
            return None
        return self.initializers.get(self.inputs[index])

    def add_constant(self, value: np.ndarray | np.generic, purpose: str) -> str:
        """Create a constant tensor (e.g. an attribute that later opsets made an input); returns its name."""
        name = f"{self.name or self.outputs[0]}::{purpose}"
        self.new_constants[name] = np.asarray(value)
        return name

    def node(self, op: str, attrs: Any, inputs: Iterable[str] | None = None) -> Node:
        """The usual result: one edgecnn node with this node's name, inputs and outputs."""
        return Node(op, self.name, list(self.inputs if inputs is None else inputs), list(self.outputs), attrs)


Converter = Callable[[OnnxNode], list[Node]]

_CONVERTERS: dict[str, Converter] = {}


def onnx_converter(*op_types: str) -> Callable[[Converter], Converter]:
    """Register a converter for one or more ONNX op types (default domain)."""

    def decorate(fn: Converter) -> Converter:
        for op_type in op_types:
            if op_type in _CONVERTERS:
                raise RuntimeError(f"ONNX converter for {op_type} registered twice")
            _CONVERTERS[op_type] = fn
        return fn

    return decorate


def get_converter(op_type: str) -> Converter | None:
    _ensure_loaded()
    return _CONVERTERS.get(op_type)


def supported_onnx_ops() -> frozenset[str]:
    _ensure_loaded()
    return frozenset(_CONVERTERS)


def _ensure_loaded() -> None:
    import edgecnn.importers.onnx.converters  # noqa: F401  (registers every family)


def _coerce(value: Any, annotation: str, name: str) -> Any:
    """Convert a decoded ONNX attribute value to the type a dataclass field declares."""
    if annotation.startswith("tuple"):
        check_list = value if isinstance(value, (list, tuple)) else [value]
        return tuple(int(v) if "int" in annotation else v for v in check_list)
    if annotation == "bool":
        return bool(int(value))
    if annotation.startswith("int"):
        return int(value)
    if annotation == "float":
        return float(value)
    if annotation == "str":
        if not isinstance(value, str):
            raise ValueError(f"attribute '{name}' must be a string, got {value!r}")
        return value
    if annotation == "AutoPad":
        from edgecnn.ops.common import AutoPad

        try:
            return AutoPad(value)
        except ValueError:
            raise ValueError(
                f"auto_pad {value!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"
            ) from None
    return value


def attrs_from_onnx(
    n: OnnxNode, attrs_type: type, renames: dict[str, str] | None = None, **fixed: Any
) -> Any:
    """Build ``attrs_type`` from the ONNX attributes whose names match its fields.

    ``renames`` maps ONNX names to field names (transA -> trans_a); ``fixed`` sets fields directly.
    """
    names = {f.name: f.type for f in dataclasses.fields(attrs_type)}
    values: dict[str, Any] = {}
    for key, value in n.attributes.items():
        field_name = (renames or {}).get(key, key)
        if field_name in names and field_name not in fixed:
            values[field_name] = _coerce(value, str(names[field_name]), key)
    values.update(fixed)
    return attrs_type(**values)
