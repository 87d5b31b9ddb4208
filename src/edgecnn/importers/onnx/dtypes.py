"""ONNX element types as edgecnn dtype names.

The supported types are a fixed table (``TensorProto.DataType`` numbers from onnx.proto), so that
reading a model does not import the onnx package (a tenth of a second at start-up); onnx is
imported only to name an unsupported type in an error message."""

from __future__ import annotations

from edgecnn.errors import ModelFormatError
from edgecnn.ir.dtypes import SUPPORTED_DTYPES

ELEMENT_TYPES: dict[int, str] = {
    1: "float32",  # FLOAT
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",  # DOUBLE
    12: "uint32",
    13: "uint64",
}
"""ONNX element type number -> edgecnn dtype name, for every type edgecnn supports."""

assert set(ELEMENT_TYPES.values()) == set(SUPPORTED_DTYPES)


def numpy_dtype_of(elem_type: int, where: str) -> str:
    name = ELEMENT_TYPES.get(elem_type)
    if name is None:
        raise ModelFormatError(f"{where}: element type {_type_name(elem_type)} is not supported")
    return name


def _type_name(elem_type: int) -> str:
    """ONNX's name of an element type number (its number if onnx does not know it)."""
    try:
        import onnx
    except ImportError:
        return str(elem_type)
    if elem_type in onnx.TensorProto.DataType.values():
        return str(onnx.TensorProto.DataType.Name(elem_type))
    return str(elem_type)
