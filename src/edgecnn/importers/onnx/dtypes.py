"""ONNX element types as edgecnn dtype names."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from edgecnn.errors import ModelFormatError
from edgecnn.ir.dtypes import SUPPORTED_DTYPES


def numpy_dtype_of(elem_type: int, where: str) -> str:
    try:
        name = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError, ValueError):
        name = ""
    if name not in SUPPORTED_DTYPES:
        type_name = (
            onnx.TensorProto.DataType.Name(elem_type)
            if elem_type in onnx.TensorProto.DataType.values()
            else str(elem_type)
        )
        raise ModelFormatError(f"{where}: element type {type_name} is not supported")
    return name
